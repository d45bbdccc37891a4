"""The deterministic mock judge: the runner answers it itself, with no network and no key.

It submits its report on the first turn: every criterion met (graded ones at 1.0), except those named
by ``tolokaforge-mock-judge:unmet=a,b``, which it reports not met (score 0.0). Its report goes
through the same validation, scoring and report as a real judge's, so a pack's judge configuration
is exercised offline -- only the verdicts are canned.
"""

from __future__ import annotations

import json
from typing import Any

from tolokaforge.core.llm import Completion
from tolokaforge.core.models import Rubric, mock_unmet_criteria

from .report import SUBMIT_REPORT, verdict_line

__all__ = ["MockJudgeChat"]


class MockJudgeChat:
    def __init__(self, model: str, rubric: Rubric) -> None:
        self._unmet = mock_unmet_criteria(model)
        self._rubric = rubric
        self._calls = 0

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        self._calls += 1
        arguments: dict[str, Any] = {}
        for criterion in self._rubric.criteria:
            met = criterion.id not in self._unmet
            arguments[f"{criterion.id}_justification"] = f"mock judge: canned verdict\n{verdict_line(met)}"
            arguments[criterion.id] = met if criterion.kind == "binary" else (1.0 if met else 0.0)
        arguments["reasons"] = "mock judge: canned verdicts, no model consulted"
        call = {
            "id": f"mock-{self._calls}",
            "type": "function",
            "function": {"name": SUBMIT_REPORT, "arguments": json.dumps(arguments)},
        }
        return Completion(message={"role": "assistant", "content": None, "tool_calls": [call]})
