"""runner.proto matches the original RunnerService field for field (docs/protocol/runner.md).

The table below is transcribed from the original contract's proto listing (names, numbers, types, labels). The
compiled descriptor must equal it exactly; the only fields allowed beyond it are listed in
ADDITIVE, each a new number on an existing message.
"""

from __future__ import annotations

from typing import Any

import pytest

PACKAGE = "tolokaforge.runner.v1"

RPCS = {
    "RegisterTrial": ("RegisterTrialRequest", "RegisterTrialResponse"),
    "ExecuteTool": ("ExecuteToolRequest", "ExecuteToolResponse"),
    "GradeTrial": ("GradeTrialRequest", "GradeTrialResponse"),
    "GetState": ("GetStateRequest", "GetStateResponse"),
    "ResetTrial": ("ResetTrialRequest", "ResetTrialResponse"),
    "CleanupTrial": ("CleanupTrialRequest", "CleanupTrialResponse"),
    "HealthCheck": ("HealthCheckRequest", "HealthCheckResponse"),
}

# (field name, number, type, label) -- label "" singular, "repeated", or "optional" (proto3 optional).
Field = tuple[str, int, str, str]

MESSAGES: dict[str, list[Field]] = {
    "RegisterTrialRequest": [
        ("trial_id", 1, "string", ""),
        ("trial_spec_json", 2, "string", ""),
        ("default_tool_timeout_s", 3, "double", ""),
        ("engine_protocol_version", 4, "int32", ""),
    ],
    "RegisterTrialResponse": [
        ("success", 1, "bool", ""),
        ("error", 2, "string", ""),
        ("tool_schemas", 3, "ToolSchema", "repeated"),
        ("num_agent_tools", 4, "int32", ""),
        ("num_user_tools", 5, "int32", ""),
    ],
    "ToolSchema": [
        ("name", 1, "string", ""),
        ("description", 2, "string", ""),
        ("parameters_json", 3, "string", ""),
        ("category", 4, "string", ""),
        ("timeout_s", 5, "double", ""),
    ],
    "ExecuteToolRequest": [
        ("trial_id", 1, "string", ""),
        ("tool_name", 2, "string", ""),
        ("arguments_json", 3, "string", ""),
        ("timeout_seconds", 4, "double", ""),
        ("executor", 5, "string", ""),
        ("call_id", 6, "string", ""),
    ],
    "ExecuteToolResponse": [
        ("status", 1, "ExecutionStatus", ""),
        ("output", 2, "string", ""),
        ("error_message", 3, "string", ""),
        ("metrics", 4, "ToolMetrics", ""),
    ],
    "ToolMetrics": [
        ("latency_seconds", 1, "double", ""),
        ("exit_code", 2, "int32", ""),
        ("state_mutations", 3, "int32", ""),
    ],
    "GradeTrialRequest": [
        ("trial_id", 1, "string", ""),
        ("llm_messages_json", 2, "string", ""),
        ("grading_components", 4, "string", "repeated"),
        ("termination_reason", 5, "string", ""),
    ],
    "GradeTrialResponse": [
        ("success", 1, "bool", ""),
        ("error", 2, "string", ""),
        ("grade", 3, "Grade", ""),
    ],
    "Grade": [
        ("binary_pass", 1, "bool", ""),
        ("score", 2, "double", ""),
        ("components", 3, "GradeComponents", ""),
        ("reasons", 4, "string", ""),
        ("state_diff_json", 5, "string", ""),
        ("custom_checks", 6, "CustomCheckResult", "repeated"),
        ("criterion_results", 7, "CriterionResult", "repeated"),
        ("judge_status", 8, "JudgeStatus", ""),
        ("judge_report", 9, "JudgeReport", ""),
        ("trace_checks", 10, "TraceConstraintResult", "repeated"),
        ("trace_checks_summary", 11, "TraceChecksSummary", ""),
    ],
    "TraceConstraintResult": [
        ("id", 1, "string", ""),
        ("kind", 2, "string", ""),
        ("passed", 3, "bool", ""),
        ("weight", 4, "double", ""),
        ("message", 5, "string", ""),
        ("matched_positions", 6, "int32", "repeated"),
        ("severity", 7, "string", ""),
        ("undecided", 8, "bool", ""),
    ],
    "TracePathResult": [
        ("id", 1, "string", ""),
        ("score", 2, "double", ""),
        ("gate_failed", 3, "bool", ""),
    ],
    "TraceChecksSummary": [
        ("winning_path", 1, "string", ""),
        ("gate_failed", 2, "bool", ""),
        ("failed_gate_ids", 3, "string", "repeated"),
        ("paths", 4, "TracePathResult", "repeated"),
    ],
    "CriterionResult": [
        ("id", 1, "string", ""),
        ("met", 2, "bool", ""),
        ("score", 3, "double", ""),
        ("justification", 4, "string", ""),
    ],
    "JudgeReport": [
        ("calls", 1, "int32", ""),
        ("prompt_tokens", 2, "int32", ""),
        ("completion_tokens", 3, "int32", ""),
        ("reasoning_tokens", 4, "int32", ""),
        ("cost_usd", 5, "double", ""),
        ("tool_calls", 6, "int32", ""),
        ("transcript_json", 7, "string", ""),
    ],
    "GradeComponents": [
        ("state_checks", 1, "double", ""),
        ("transcript_rules", 2, "double", ""),
        ("llm_judge", 3, "double", ""),
        ("custom_checks", 4, "double", ""),
        ("trace_checks", 5, "double", "optional"),
    ],
    # This project's: one typed reason of a grade (docs/protocol/runner.md).
    "GradeReason": [
        ("kind", 1, "string", ""),
        ("verdict", 2, "GradeReasonVerdict", ""),
        ("message", 3, "string", ""),
    ],
    # This project's: a file a tool call produced beside its output (docs/web-tasks.md).
    "Attachment": [
        ("media_type", 1, "string", ""),
        ("data", 2, "bytes", ""),
        ("label", 3, "string", ""),
        ("for_model", 4, "bool", ""),
    ],
    # This project's: one row per item of a list-shaped grading component (docs/grading.md).
    "ComponentItemResult": [
        ("component", 1, "string", ""),
        ("index", 2, "int32", ""),
        ("label", 3, "string", ""),
        ("met", 4, "bool", ""),
        ("message", 5, "string", ""),
        ("details_json", 6, "string", ""),
    ],
    "CustomCheckResult": [
        ("check_name", 1, "string", ""),
        ("status", 2, "string", ""),
        ("score", 3, "double", ""),
        ("message", 4, "string", ""),
        ("details_json", 5, "string", ""),
    ],
    "GetStateRequest": [
        ("trial_id", 1, "string", ""),
        ("include_unstable", 2, "bool", ""),
        ("tables", 3, "string", "repeated"),
    ],
    "GetStateResponse": [
        ("success", 1, "bool", ""),
        ("error", 2, "string", ""),
        ("state_json", 3, "string", ""),
        ("stable_hash", 4, "string", ""),
        ("full_hash", 5, "string", ""),
    ],
    "ResetTrialRequest": [
        ("trial_id", 1, "string", ""),
        ("execute_init_actions", 2, "bool", ""),
    ],
    "ResetTrialResponse": [
        ("success", 1, "bool", ""),
        ("error", 2, "string", ""),
        ("state_hash", 3, "string", ""),
    ],
    "CleanupTrialRequest": [("trial_id", 1, "string", "")],
    "CleanupTrialResponse": [
        ("success", 1, "bool", ""),
        ("error", 2, "string", ""),
    ],
    "HealthCheckRequest": [],
    "HealthCheckResponse": [
        ("status", 1, "string", ""),
        ("version", 2, "string", ""),
        ("num_active_trials", 3, "int32", ""),
        ("db_service_connected", 4, "bool", ""),
        ("available_adapters", 5, "string", "repeated"),
    ],
}

# Fields this project adds to the seed contract: new numbers only, never a renumbering.
ADDITIVE: dict[str, list[Field]] = {
    # The classified failure, and whether an ERROR is the tool's own answer whose changes stand.
    "ExecuteToolResponse": [
        ("tool_error", 5, "tolokaforge.tool.v1.ToolError", ""),
        ("reported_by_tool", 6, "bool", ""),
        ("attachments", 7, "Attachment", "repeated"),
    ],
    # Why a registration failed, typed, and whether sending it again can help (never a matched string).
    "RegisterTrialResponse": [
        ("error_kind", 6, "RegistrationErrorKind", ""),
        ("retryable", 7, "bool", ""),
    ],
    "GradeTrialResponse": [("error_kind", 4, "GradeErrorKind", ""), ("released", 5, "bool", "")],
    # Grading that also forgets the trial, saving a CleanupTrial per trial (docs/protocol/runner.md).
    "GradeTrialRequest": [("release", 6, "bool", "")],
    # A task sent once per runner, then named by its digest (docs/protocol/runner.md#registertrial).
    # ... and the parts many tasks share (code bundle, initial tables), each sent once per runner.
    "RegisterTrialRequest": [
        ("task_json", 5, "string", ""),
        ("task_digest", 6, "string", ""),
        ("code_json", 7, "string", ""),
        ("code_digest", 8, "string", ""),
        ("tables_json", 9, "string", ""),
        ("tables_digest", 10, "string", ""),
    ],
    "HealthCheckResponse": [("accepts_task_digest", 6, "bool", ""), ("accepts_task_parts", 7, "bool", "")],
    # The spec's note on include_agent_system_prompt: explicit presence, as for trace_checks.
    "JudgeReport": [("include_agent_system_prompt", 8, "bool", "optional")],
    # The τ²-style components and the Terminal-Bench verifier: their scores (explicit presence, as
    # trace_checks) and item rows.
    "GradeComponents": [
        ("env_assertions", 6, "double", "optional"),
        ("tau2_actions", 7, "double", "optional"),
        ("tau2_communicate", 8, "double", "optional"),
        ("terminal_tests", 9, "double", "optional"),
        ("web_checks", 10, "double", "optional"),
    ],
    # ... and the reasons typed, beside the seed's " | "-joined string.
    "Grade": [
        ("component_items", 12, "ComponentItemResult", "repeated"),
        ("reason_items", 13, "GradeReason", "repeated"),
    ],
}

ENUMS: dict[str, list[tuple[str, int]]] = {
    "ExecutionStatus": [
        ("EXECUTION_STATUS_UNSPECIFIED", 0),
        ("EXECUTION_STATUS_SUCCESS", 1),
        ("EXECUTION_STATUS_ERROR", 2),
        ("EXECUTION_STATUS_TIMEOUT", 3),
        ("EXECUTION_STATUS_TOOL_NOT_FOUND", 4),
        ("EXECUTION_STATUS_INVALID_ARGUMENTS", 5),
        ("EXECUTION_STATUS_TRIAL_NOT_FOUND", 6),
    ],
    "JudgeStatus": [
        ("JUDGE_STATUS_UNSPECIFIED", 0),
        ("JUDGE_STATUS_COMPLETED", 1),
        ("JUDGE_STATUS_ERRORED", 2),
    ],
}

SCALAR_TYPES = {
    "TYPE_STRING": "string",
    "TYPE_BOOL": "bool",
    "TYPE_INT32": "int32",
    "TYPE_DOUBLE": "double",
    "TYPE_BYTES": "bytes",
}


def _runner_file(descriptor_set: dict[str, Any]) -> dict[str, Any]:
    (file,) = [f for f in descriptor_set["file"] if f["package"] == PACKAGE]
    assert file["name"] == "tolokaforge/runner/v1/runner.proto"
    return file


def _field_row(field: dict[str, Any]) -> Field:
    if field["type"] in SCALAR_TYPES:
        type_name = SCALAR_TYPES[field["type"]]
    else:
        type_name = field["typeName"].removeprefix(f".{PACKAGE}.").lstrip(".")
    if field.get("proto3Optional"):
        label = "optional"
    elif field["label"] == "LABEL_REPEATED":
        label = "repeated"
    else:
        label = ""
    return (field["name"], field["number"], type_name, label)


def test_service_rpcs_match_spec(descriptor_set: dict[str, Any]) -> None:
    (service,) = _runner_file(descriptor_set)["service"]
    assert service["name"] == "RunnerService"
    declared = {
        m["name"]: (m["inputType"].removeprefix(f".{PACKAGE}."), m["outputType"].removeprefix(f".{PACKAGE}."))
        for m in service["method"]
    }
    assert declared == RPCS
    assert not any(m.get("clientStreaming") or m.get("serverStreaming") for m in service["method"])


def test_message_names_match_spec(descriptor_set: dict[str, Any]) -> None:
    assert {m["name"] for m in _runner_file(descriptor_set)["messageType"]} == set(MESSAGES)


@pytest.mark.parametrize("message_name", sorted(MESSAGES))
def test_message_fields_match_spec(descriptor_set: dict[str, Any], message_name: str) -> None:
    (message,) = [m for m in _runner_file(descriptor_set)["messageType"] if m["name"] == message_name]
    declared = sorted(_field_row(f) for f in message.get("field", []))
    expected = sorted(MESSAGES[message_name] + ADDITIVE.get(message_name, []))
    assert declared == expected


def test_grade_trial_request_reserves_field_3(descriptor_set: dict[str, Any]) -> None:
    (message,) = [m for m in _runner_file(descriptor_set)["messageType"] if m["name"] == "GradeTrialRequest"]
    assert message["reservedRange"] == [{"start": 3, "end": 4}]


ADDITIVE_ENUMS = {"GradeErrorKind", "GradeReasonVerdict", "RegistrationErrorKind"}
"""Enums this contract adds beyond the seed's (each used only by an additive field)."""


@pytest.mark.parametrize("enum_name", sorted(ENUMS))
def test_enums_match_spec(descriptor_set: dict[str, Any], enum_name: str) -> None:
    enums = {e["name"]: e for e in _runner_file(descriptor_set)["enumType"]}
    assert set(enums) == set(ENUMS) | ADDITIVE_ENUMS
    assert [(v["name"], v["number"]) for v in enums[enum_name]["value"]] == ENUMS[enum_name]


def test_additive_fields_take_new_numbers() -> None:
    for message_name, fields in ADDITIVE.items():
        seed_numbers = {number for _, number, _, _ in MESSAGES[message_name]}
        assert all(number not in seed_numbers for _, number, _, _ in fields)


def test_tool_error_taxonomy_has_all_nine_categories(descriptor_set: dict[str, Any]) -> None:
    (file,) = [f for f in descriptor_set["file"] if f["name"] == "tolokaforge/tool/v1/tool_error.proto"]
    (category,) = [e for e in file["enumType"] if e["name"] == "ToolErrorCategory"]
    names = [v["name"].removeprefix("TOOL_ERROR_CATEGORY_").lower() for v in category["value"]]
    assert names == [
        "unspecified",
        "invalid_arguments",
        "not_found",
        "permission_denied",
        "execution_failed",
        "timeout",
        "concurrency_conflict",
        "cancelled",
        "process_crashed",
        "unknown",
    ]
    (error,) = [m for m in file["messageType"] if m["name"] == "ToolError"]
    assert [(f["name"], f["number"]) for f in error["field"]] == [
        ("category", 1),
        ("message", 2),
        ("retryable", 3),
        ("details_json", 4),
    ]
