"""The DB Service HTTP API: its OpenAPI document, and pydantic models of its bodies.

Generated from ``contracts/openapi/db-service.yaml`` (the models by datamodel-codegen). The service and
its clients validate against the document itself (:func:`openapi_document`, compiled once); the models
are the typed contract for code outside this repository that talks to a DB service.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from ._gen.db_service import (
    DeleteOperation,
    Error,
    ErrorCode,
    HashResponse,
    HealthResponse,
    InitRequest,
    InsertOperation,
    KeyedTable,
    LeaseInfo,
    LeaseRequest,
    ListTable,
    Operation,
    OwnerId,
    PatchResponse,
    RecordKey,
    Sha256Hex,
    SnapshotInfo,
    SnapshotName,
    StatePatchRequest,
    StateResponse,
    StateVersion,
    Table,
    TableChange,
    TableName,
    TablePatchRequest,
    Tables,
    TableSchema,
    TrialId,
    TrialInfo,
    UnstableField,
    UnstableReason,
    UpdateOperation,
    UpsertOperation,
    Where,
)

__all__ = [
    "DeleteOperation",
    "Error",
    "ErrorCode",
    "HashResponse",
    "HealthResponse",
    "InitRequest",
    "InsertOperation",
    "KeyedTable",
    "LeaseInfo",
    "LeaseRequest",
    "ListTable",
    "Operation",
    "OwnerId",
    "PatchResponse",
    "RecordKey",
    "Sha256Hex",
    "SnapshotInfo",
    "SnapshotName",
    "StatePatchRequest",
    "StateResponse",
    "StateVersion",
    "Table",
    "TableChange",
    "TableName",
    "TablePatchRequest",
    "TableSchema",
    "Tables",
    "TrialId",
    "TrialInfo",
    "UnstableField",
    "UnstableReason",
    "UpdateOperation",
    "UpsertOperation",
    "Where",
    "openapi_document",
]


def openapi_document() -> Path:
    """The DB Service's OpenAPI document, as shipped with this package."""
    return Path(str(files("tolokaforge.contracts") / "_gen" / "db-service.yaml"))
