from __future__ import annotations

from typing import Any

import pytest

from tolokaforge.core import RECORDED_CALL_STATUSES, InvalidRecordedToolCallError, RecordedToolCall


def _record(**overrides: Any) -> RecordedToolCall:
    fields: dict[str, Any] = {
        "call_id": "call_1",
        "sequence": 0,
        "tool_name": "get_user",
        "arguments": {"user_id": "u1"},
        "executor": "agent",
        "status": "success",
        "output": '{"name": "Mia"}',
        "latency_seconds": 0.01,
        "timestamp": 1_700_000_000.0,
    }
    fields.update(overrides)
    return RecordedToolCall(**fields)


def test_a_successful_call_needs_no_error_fields() -> None:
    record = _record()
    assert record.error_message == ""
    assert record.error_category is None


def test_recorded_statuses_are_execution_status_in_lower_case_minus_trial_not_found() -> None:
    # TRIAL_NOT_FOUND reached no tool, so it is never recorded.
    assert RECORDED_CALL_STATUSES == ("success", "error", "timeout", "tool_not_found", "invalid_arguments")


@pytest.mark.parametrize("status", RECORDED_CALL_STATUSES)
def test_every_recorded_status_is_accepted(status: str) -> None:
    assert _record(status=status, error_message="" if status == "success" else "boom").status == status


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"call_id": ""}, "call_id"),
        ({"sequence": -1}, "sequence"),
        ({"tool_name": ""}, "tool_name"),
        ({"executor": "assistant"}, "executor"),
        ({"status": "trial_not_found"}, "status"),
        ({"status": "SUCCESS"}, "status"),
        ({"latency_seconds": -0.5}, "latency_seconds"),
        ({"latency_seconds": float("nan")}, "latency_seconds"),
    ],
)
def test_a_record_no_execute_tool_call_could_produce_is_refused(
    overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidRecordedToolCallError, match=rf"^RecordedToolCall\.{field}: ") as caught:
        _record(**overrides)
    assert caught.value.field == field


def test_records_are_frozen() -> None:
    record = _record()
    with pytest.raises(AttributeError):
        record.output = "edited"  # type: ignore[misc]
