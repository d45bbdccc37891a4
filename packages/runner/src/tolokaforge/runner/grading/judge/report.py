"""The judge's terminal ``submit_report`` tool: its schema, built from the rubric, and its validation.

The arguments are one flat object (nested schemas are where providers' JSON-Schema dialects differ):
for each criterion ``<id>_justification`` and then ``<id>`` -- the reasoning before the verdict -- and
last ``reasons``. A justification ends with the line ``VERDICT: MET`` or ``VERDICT: NOT MET``; a
verdict that contradicts it is an inconsistent report. Anything wrong raises :class:`ReportRejected`
with a message written for the judge, which gets it back as the tool's error and may try again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

from tolokaforge.core.models import Criterion, Rubric

__all__ = [
    "MET_THRESHOLD",
    "SUBMIT_REPORT",
    "ParsedReport",
    "ReportRejected",
    "Verdict",
    "parse_report",
    "submit_report_tool",
    "verdict_line",
]

SUBMIT_REPORT = "submit_report"
MET_THRESHOLD = 0.5
"""A graded criterion is met when its score is at least this."""
_MET, _NOT_MET = "VERDICT: MET", "VERDICT: NOT MET"


class ReportRejected(ValueError):
    """A malformed or inconsistent report; the message tells the judge what to fix."""


@dataclass(frozen=True)
class Verdict:
    id: str
    met: bool
    score: float
    justification: str


@dataclass(frozen=True)
class ParsedReport:
    verdicts: list[Verdict]
    reasons: str


def verdict_line(met: bool) -> str:
    return _MET if met else _NOT_MET


def submit_report_tool(rubric: Rubric) -> dict[str, Any]:
    """The OpenAI function spec of ``submit_report`` for this rubric."""
    properties: dict[str, Any] = {}
    for criterion in rubric.criteria:
        properties[f"{criterion.id}_justification"] = {
            "type": "string",
            "description": f"Why criterion {criterion.id} is or is not met, citing the evidence; "
            f"the last line is exactly '{_MET}' or '{_NOT_MET}'.",
        }
        if criterion.kind == "binary":
            properties[criterion.id] = {"type": "boolean", "description": f"Is {criterion.id} met?"}
        else:
            properties[criterion.id] = {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": f"How well {criterion.id} is met, from 0 to 1 (met from {MET_THRESHOLD}).",
            }
    properties["reasons"] = {"type": "string", "description": "A short overall account of the verdicts."}
    return {
        "type": "function",
        "function": {
            "name": SUBMIT_REPORT,
            "description": "Submit the verdict on every criterion. Ends the judgement.",
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


def parse_report(rubric: Rubric, arguments_json: str) -> ParsedReport:
    """The verdicts of a ``submit_report`` call, or :class:`ReportRejected` naming every problem."""
    try:
        raw: Any = json.loads(arguments_json) if arguments_json.strip() else {}
    except ValueError as error:
        raise ReportRejected(f"the arguments are not JSON ({error}); send one JSON object") from error
    if not isinstance(raw, dict):
        raise ReportRejected("the arguments must be a JSON object keyed by criterion id")
    arguments = cast(dict[str, Any], raw)
    problems: list[str] = []
    expected_keys = {"reasons"}
    verdicts: list[Verdict] = []
    for criterion in rubric.criteria:
        expected_keys |= {criterion.id, f"{criterion.id}_justification"}
        verdict = _verdict(criterion, arguments, problems)
        if verdict is not None:
            verdicts.append(verdict)
    unknown = sorted(set(arguments) - expected_keys)
    if unknown:
        problems.append(f"unknown keys {unknown} (the rubric has no such criteria)")
    reasons = arguments.get("reasons")
    if not isinstance(reasons, str) or not reasons.strip():
        problems.append("'reasons' must be a non-empty string")
    if problems:
        raise ReportRejected("report rejected: " + "; ".join(problems) + ". Call submit_report again.")
    assert isinstance(reasons, str)
    return ParsedReport(verdicts=verdicts, reasons=reasons.strip())


def _verdict(criterion: Criterion, arguments: dict[str, Any], problems: list[str]) -> Verdict | None:
    key = criterion.id
    justification = arguments.get(f"{key}_justification")
    value = arguments.get(key)
    found = len(problems)
    if not isinstance(justification, str) or not justification.strip():
        problems.append(f"'{key}_justification' must be a non-empty string")
    if criterion.kind == "binary":
        if not isinstance(value, bool):
            problems.append(f"'{key}' must be true or false (a binary criterion)")
    elif isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        problems.append(f"'{key}' must be a number from 0 to 1 (a graded criterion)")
    if len(problems) > found:
        return None
    assert isinstance(justification, str)
    score = (1.0 if value else 0.0) if criterion.kind == "binary" else float(cast(float, value))
    met = bool(value) if criterion.kind == "binary" else score >= MET_THRESHOLD
    stated = _stated_verdict(justification)
    if stated is None:
        problems.append(f"'{key}_justification' must end with the line '{_MET}' or '{_NOT_MET}'")
        return None
    if stated != met:
        given = f"score {score:g}" if criterion.kind == "graded" else str(value).lower()
        problems.append(
            f"'{key}' is inconsistent: the justification says '{verdict_line(stated)}' but the verdict is {given}"
        )
        return None
    return Verdict(id=key, met=met, score=score, justification=justification.strip())


def _stated_verdict(justification: str) -> bool | None:
    lines = [line.strip() for line in justification.strip().splitlines() if line.strip()]
    last = lines[-1].upper() if lines else ""
    if last == _MET:
        return True
    if last == _NOT_MET:
        return False
    return None
