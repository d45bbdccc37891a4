"""The fold by combine method, and the JSONPath operators, as pure functions."""

from __future__ import annotations

from typing import Any

import pytest

from tolokaforge.core.models import JsonPathCheck
from tolokaforge.runner.errors import MissingComponentWeight
from tolokaforge.runner.grading.fold import fold
from tolokaforge.runner.grading.jsonpath_checks import evaluate_jsonpaths


@pytest.mark.parametrize(
    ("method", "weights", "threshold", "scores", "score", "passed"),
    [
        (
            "weighted",
            {"state_checks": 0.7, "transcript_rules": 0.3},
            0.75,
            {"state_checks": 1.0, "transcript_rules": 0.5},
            0.85,
            True,
        ),
        (
            "weighted",
            {"state_checks": 0.7, "transcript_rules": 0.3},
            0.85,
            {"state_checks": 1.0, "transcript_rules": 0.5},
            0.85,
            True,
        ),
        (
            "weighted",
            {"state_checks": 0.7, "transcript_rules": 0.3},
            0.86,
            {"state_checks": 1.0, "transcript_rules": 0.5},
            0.85,
            False,
        ),
        (
            "weighted",
            {"state_checks": 2.0, "custom_checks": 2.0, "llm_judge": 5.0},
            0.5,
            {"state_checks": 1.0, "custom_checks": 0.0},
            0.5,
            True,
        ),
        ("all", {}, 0.5, {"state_checks": 1.0, "transcript_rules": 0.5}, 0.5, True),
        ("all", {}, 0.51, {"state_checks": 1.0, "transcript_rules": 0.5}, 0.5, False),
        ("any", {}, 1.0, {"state_checks": 0.0, "transcript_rules": 1.0}, 1.0, True),
        ("any", {}, 0.1, {"state_checks": 0.0, "transcript_rules": 0.0}, 0.0, False),
    ],
)
def test_fold_methods_and_thresholds(
    method: Any,
    weights: dict[str, float],
    threshold: float,
    scores: dict[str, float],
    score: float,
    passed: bool,
) -> None:
    result = fold(method, weights, threshold, scores, configured=sorted(scores))
    assert result.score == pytest.approx(score)
    assert result.passed is passed


def test_weighted_fold_refuses_a_scored_component_without_weight() -> None:
    with pytest.raises(MissingComponentWeight, match="transcript_rules was scored"):
        fold(
            "weighted",
            {"state_checks": 1.0},
            0.5,
            {"state_checks": 1.0, "transcript_rules": 1.0},
            configured=[],
        )


def test_weighted_fold_with_zero_shares_fails_with_a_reason() -> None:
    result = fold("weighted", {"state_checks": 0.0}, 0.0, {"state_checks": 1.0}, configured=["state_checks"])
    assert (result.score, result.passed) == (0.0, False) and "sum to zero" in result.sentence


def test_fold_with_nothing_scored() -> None:
    assert fold("weighted", {}, 1.0, {}, configured=[]).passed
    asked = fold("all", {}, 0.0, {}, configured=["transcript_rules"])
    assert (asked.score, asked.passed) == (0.0, False) and "transcript_rules" in asked.sentence


TABLES = {
    "orders": [
        {"id": "O-1", "status": "Paid", "total": 10, "tags": ["gift", "rush"], "note": "Leave at door"}
    ],
    "users": {"U-1": {"vip": True, "balance": 5.5}},
    "empty": [],
}


@pytest.mark.parametrize(
    ("check", "holds"),
    [
        ({"path": "$.db.orders[0].total", "equals": 10.0}, True),
        ({"path": "$.db.orders[0].total", "equals": "10"}, False),
        ({"path": "$.db.users['U-1'].vip", "equals": 1}, False),
        ({"path": "$.db.users['U-1'].vip", "equals": True}, True),
        ({"path": "$.db.orders[0].status", "not_equals": "open"}, True),
        ({"path": "$.db.orders[0].status", "equals_ci": "PAID"}, True),
        ({"path": "$.db.orders[0].note", "contains": "door"}, True),
        ({"path": "$.db.orders[0].note", "contains": "DOOR"}, False),
        ({"path": "$.db.orders[0].note", "contains_ci": "DOOR"}, True),
        ({"path": "$.db.orders[0].tags", "contains": "rush"}, True),
        ({"path": "$.db.orders[?(@.id=='O-1')].status", "equals": "Paid"}, True),
        ({"path": "$.db.orders[?(@.id=='O-9')]", "exists": False}, True),
        ({"path": "$.db.orders[0].missing", "exists": True}, False),
        ({"path": "$.db.orders[0].missing", "equals": None}, False),
        ({"path": "$.db.users['U-1'].balance", "greater_than": 5}, True),
        ({"path": "$.db.users['U-1'].balance", "less_or_equal": 5}, False),
        ({"path": "$.db.orders[0].status", "greater_than": 1}, False),
        ({"path": "$.db.orders", "length": 1}, True),
        ({"path": "$.tables.empty", "length": 0}, True),
        ({"path": "$.db.orders[*].id", "equals": "O-1"}, True),
    ],
)
def test_jsonpath_operator(check: dict[str, Any], holds: bool) -> None:
    result = evaluate_jsonpaths([JsonPathCheck.model_validate(check)], TABLES)
    assert result.score == (1.0 if holds else 0.0), result.segment


def test_jsonpath_check_needs_exactly_one_operator() -> None:
    with pytest.raises(ValueError, match="exactly one operator"):
        JsonPathCheck.model_validate({"path": "$.db.x", "equals": 1, "exists": True})
    with pytest.raises(ValueError, match="exactly one operator"):
        JsonPathCheck.model_validate({"path": "$.db.x"})
