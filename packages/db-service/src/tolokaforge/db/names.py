"""Client-side checks of the names a client puts in a URL path, by the contract's own patterns.

The service checks them too; checking before sending means a name that would change the URL's meaning
(a ``/``, ``..``) fails with the same 422 over HTTP as in-process, instead of reaching another route.
"""

from __future__ import annotations

from pydantic import BaseModel, RootModel, ValidationError

from tolokaforge.contracts import db_api
from tolokaforge.db.errors import ValidationFailedError

__all__ = ["check_snapshot_name", "check_table_name", "check_trial_id"]


def _check(model: type[RootModel[str]] | type[BaseModel], value: str, what: str) -> str:
    try:
        model.model_validate(value)
    except ValidationError:
        raise ValidationFailedError(f"invalid {what}: {value[:80]!r}", {"field": what}) from None
    return value


def check_trial_id(value: str) -> str:
    return _check(db_api.TrialId, value, "trial_id")


def check_table_name(value: str) -> str:
    return _check(db_api.TableName, value, "table_name")


def check_snapshot_name(value: str) -> str:
    return _check(db_api.SnapshotName, value, "snapshot_name")
