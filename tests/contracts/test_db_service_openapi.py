"""contracts/openapi/db-service.yaml: a valid OpenAPI 3.1 document covering the spec's DB endpoints.

The endpoint list is the original protocol's DB Service list (docs/protocol/db-service.md#endpoints); the three additions (a multi-table
atomic PATCH, snapshot deletion, lease renewal) are named here so that any other drift fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from openapi_spec_validator import validate
from pydantic import ValidationError

from tolokaforge.contracts import db_api

SPEC_ENDPOINTS = {
    ("post", "/trials/{trial_id}/init"),
    ("get", "/trials/{trial_id}/state"),
    ("get", "/trials/{trial_id}/state/stable"),
    ("get", "/trials/{trial_id}/state/hash"),
    ("patch", "/trials/{trial_id}/state/{table_name}"),
    ("post", "/trials/{trial_id}/snapshots/{snapshot_name}"),
    ("post", "/trials/{trial_id}/snapshots/{snapshot_name}/restore"),
    ("post", "/trials/{trial_id}/reset"),
    ("delete", "/trials/{trial_id}"),
    ("get", "/health"),
}
ADDED_ENDPOINTS = {
    (
        "patch",
        "/trials/{trial_id}/state",
    ),  # one atomic batch over several tables (a tool call's write-through)
    ("delete", "/trials/{trial_id}/snapshots/{snapshot_name}"),  # grading leaves no snapshot behind
    ("post", "/owners/{owner}/lease"),  # a runner keeps its trials' leases alive (docs/faults.md)
}
METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


@pytest.fixture(scope="module")
def spec(repo_root: Path) -> dict[str, Any]:
    return yaml.safe_load((repo_root / "contracts/openapi/db-service.yaml").read_text())


def _operations(spec: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method, path): operation
        for path, item in spec["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    }


def test_document_is_valid_openapi_3_1(spec: dict[str, Any]) -> None:
    assert spec["openapi"].startswith("3.1")
    validate(spec)


def test_endpoints_are_the_spec_list_plus_named_additions(spec: dict[str, Any]) -> None:
    assert set(_operations(spec)) == SPEC_ENDPOINTS | ADDED_ENDPOINTS


def test_every_operation_documents_its_error_codes(spec: dict[str, Any]) -> None:
    for (method, path), operation in _operations(spec).items():
        codes = set(operation["responses"])
        assert "401" in codes, (method, path)  # every operation needs the service's token
        if path.startswith("/trials/"):
            assert "422" in codes, (method, path)  # a malformed trial / table / snapshot name
            if not path.endswith("/init"):
                assert "404" in codes, (method, path)  # init creates the trial; all else needs one
        if "requestBody" in operation:
            assert {"400", "413", "422"} <= codes, (method, path)
        if (
            method == "patch"
            or path.endswith("/init")
            or (path.endswith("{snapshot_name}") and method == "post")
        ):
            assert "409" in codes, (method, path)
        for code, response in operation["responses"].items():
            if code.startswith(("4", "5")):
                assert response == {"$ref": f"#/components/responses/{_ERROR_RESPONSES[code]}"}, (
                    method,
                    path,
                    code,
                )


_ERROR_RESPONSES = {
    "400": "BadRequest",
    "401": "Unauthorized",
    "404": "NotFound",
    "409": "Conflict",
    "413": "PayloadTooLarge",
    "422": "ValidationFailed",
}


def test_error_responses_share_one_body(spec: dict[str, Any]) -> None:
    for response in spec["components"]["responses"].values():
        assert response["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    error = spec["components"]["schemas"]["Error"]
    assert error["required"] == ["error", "message", "details"]


def test_init_links_reach_every_other_trial_operation(spec: dict[str, Any]) -> None:
    operations = _operations(spec)
    links = operations[("post", "/trials/{trial_id}/init")]["responses"]["201"]["links"]
    linked = {link["operationId"] for link in links.values()}
    needs_only_trial = {
        op["operationId"]
        for (_, path), op in operations.items()
        if path.startswith("/trials/") and "{snapshot_name}" not in path and not path.endswith("/init")
    }
    assert needs_only_trial <= linked
    for link in links.values():
        assert link["parameters"] == {"trial_id": "$request.path.trial_id"}
    snapshot_links = operations[("post", "/trials/{trial_id}/snapshots/{snapshot_name}")]["responses"]["201"][
        "links"
    ]
    assert {link["operationId"] for link in snapshot_links.values()} == {"restoreSnapshot", "deleteSnapshot"}


def test_generated_models_refuse_unknown_keys_and_bad_names() -> None:
    with pytest.raises(ValidationError, match="surprise"):
        db_api.InitRequest.model_validate({"tables": {}, "surprise": 1})
    with pytest.raises(ValidationError):
        db_api.InitRequest.model_validate({"tables": {"../etc": []}})
    request = db_api.InitRequest.model_validate(
        {"tables": {"orders": [{"id": 1}], "users": {"U-1": {"name": "Zoë"}}}, "unstable_fields": []}
    )
    assert request.tables is not None
    assert isinstance(request.tables.root["orders"].root, db_api.ListTable)
    assert isinstance(request.tables.root["users"].root, db_api.KeyedTable)


def test_generated_operation_union_dispatches_on_op() -> None:
    patch = db_api.TablePatchRequest.model_validate(
        {"operations": [{"op": "insert", "record": {"id": 1}}, {"op": "delete", "where": {"id": 2}}]}
    )
    assert [type(op.root) for op in patch.operations] == [db_api.InsertOperation, db_api.DeleteOperation]
    with pytest.raises(ValidationError):
        db_api.TablePatchRequest.model_validate({"operations": [{"op": "truncate"}]})
