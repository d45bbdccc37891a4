"""The InitRequest shortcut accepts nothing the contract refuses, and is taken for valid bodies."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import fastjsonschema  # pyright: ignore[reportMissingTypeStubs]
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tolokaforge.db.errors import ValidationFailedError
from tolokaforge.db.init_check import InitCheck
from tolokaforge.db.spec import ApiSpec

KEYS = st.text(max_size=4) | st.sampled_from(["", "k" * 256, "k" * 257, "é"])
VALUES = st.none() | st.integers() | st.text(max_size=3) | st.lists(st.integers(), max_size=2)
RECORDS = st.dictionaries(st.text(max_size=3), VALUES, max_size=2)
NOT_RECORDS = VALUES | st.lists(RECORDS, max_size=1)
TABLES = st.one_of(
    st.lists(RECORDS | NOT_RECORDS, max_size=4),
    st.dictionaries(KEYS, RECORDS | NOT_RECORDS, max_size=4),
    VALUES,
)
BODIES = st.fixed_dictionaries(
    {"tables": st.dictionaries(st.sampled_from(["orders", "users", "9bad", "a\n", ""]), TABLES, max_size=3)},
    optional={
        "owner": st.sampled_from(["runner-1", ""]),
        "lease_seconds": st.sampled_from([30, -1]),
        "from_state": st.just("0" * 64),
        "unstable_fields": st.just([{"table_name": "orders", "field_name": "ts"}]),
        "extra": st.just(1),
    },
)


def _full_accepts(spec: ApiSpec, body: Any) -> bool:
    try:
        spec.fast_validator("InitRequest")(body)
    except fastjsonschema.JsonSchemaException:  # pyright: ignore[reportUnknownMemberType]
        return False
    return True


@settings(max_examples=600, deadline=None)
@given(body=BODIES)
def test_the_shortcut_agrees_with_the_full_validation(body: dict[str, Any]) -> None:
    spec = ApiSpec.load()
    check = InitCheck(spec)
    accepted = check._accepts(body)  # pyright: ignore[reportPrivateUsage]
    full = _full_accepts(spec, body)
    assert not accepted or full, body  # never accepts what the contract refuses
    # ... and only leaves to the full validation what it refuses, or a shape it does not take (a dict
    # key that is not a string cannot arise from JSON and is left out of the drawn bodies).
    assert accepted == full, body
    if full:
        check.validate(body)
    else:
        with pytest.raises(ValidationFailedError):
            check.validate(body)


def test_a_refusal_names_the_record_as_the_full_validation_does() -> None:
    check = InitCheck(ApiSpec.load())
    with pytest.raises(ValidationFailedError, match="tables/orders/1"):
        check.validate({"tables": {"orders": [{"id": 1}, 2]}})
    with pytest.raises(ValidationFailedError, match="tables/users"):
        check.validate({"tables": {"users": {"k" * 257: {}}}})


def test_a_contract_asking_more_of_a_record_turns_the_shortcut_off(tmp_path: Path) -> None:
    document = copy.deepcopy(ApiSpec.load().document)
    document["components"]["schemas"]["ListTable"]["items"] = {"type": "object", "required": ["id"]}
    path = tmp_path / "db-service.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    check = InitCheck(ApiSpec.load(path))
    body = {"tables": {"orders": [{"name": "no id"}]}}
    assert not check._accepts(body)  # pyright: ignore[reportPrivateUsage]
    with pytest.raises(ValidationFailedError, match="id"):
        check.validate(body)
    assert InitCheck(ApiSpec.load())._accepts(body)  # pyright: ignore[reportPrivateUsage]
