"""The llm_judge component of one trial: run the judge, score its report, account for its spend.

COMPLETED: per-criterion results, the component's score and a "Judge: score=..." segment. ERRORED
(budget exhausted, malformed reports past the retry budget, the endpoint failing, no API key): no
criterion results, no score -- never 0.0 -- and the reason in the segment. Either way the JudgeReport
carries what the judge cost and said.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp

from tolokaforge.contracts.runner import CriterionResult, GradeReasonVerdict, JudgeReport, JudgeStatus
from tolokaforge.core.models import JudgeModelConfig, LLMJudgeConfig
from tolokaforge.core.transcript.messages import Message

from ...trials.context import TrialContext
from ..component import ComponentResult
from .chat import HttpJudgeChat, JudgeChat, JudgeFailed, resolve_api_key
from .loop import JudgeUsage, converse
from .mock import MockJudgeChat
from .prompt import opening_messages
from .report import ParsedReport
from .scoring import score_rubric
from .state import StateTools, read_states, render_diff

__all__ = ["JudgeOutcome", "judge_trial"]


@dataclass
class JudgeOutcome:
    status: JudgeStatus
    component: ComponentResult
    """``llm_judge``; its score is None when the judge ERRORED."""
    report: JudgeReport
    criterion_results: list[CriterionResult] = field(default_factory=lambda: [])
    gate_failed: bool = False
    """A required criterion was not met: the trial fails whatever the fold says."""

    @property
    def errored(self) -> bool:
        return self.status == JudgeStatus.ERRORED


async def judge_trial(
    trial: TrialContext,
    config: LLMJudgeConfig,
    model: JudgeModelConfig,
    agent_system_prompt: str | None,
    transcript: Sequence[Message],
) -> JudgeOutcome:
    # Outside the wall-clock budget: a cancellation half-way through would leave the initial state restored.
    initial, final = await read_states(trial)
    messages = opening_messages(config, agent_system_prompt, transcript, render_diff(initial, final))
    state = StateTools(final)
    usage = JudgeUsage()
    report: ParsedReport | None = None
    failure = ""
    try:
        async with asyncio.timeout(model.max_seconds):
            if model.is_mock:
                report = await converse(
                    MockJudgeChat(model.model, config.rubric), messages, config.rubric, state, model, usage
                )
            else:
                api_key = resolve_api_key(model)
                async with aiohttp.ClientSession() as session:
                    chat: JudgeChat = HttpJudgeChat(model, api_key, session)
                    report = await converse(chat, messages, config.rubric, state, model, usage)
    except TimeoutError:
        failure = f"wall-clock budget exhausted: no accepted report within {model.max_seconds:g}s"
    except JudgeFailed as error:
        failure = str(error)
    judge_report = _report(model, usage, messages, config.customization.include_agent_system_prompt)
    if report is None:
        segment = f"Judge: errored -- {failure}; no score, the grade is unusable"
        errored = ComponentResult("llm_judge", None, segment, verdict=GradeReasonVerdict.ERRORED)
        return JudgeOutcome(JudgeStatus.ERRORED, errored, judge_report)
    scored = score_rubric(config.rubric, report.verdicts)
    segment = f"Judge: score={scored.score:.2f} ({scored.met}/{scored.total} criteria met; {_one_line(report.reasons)})"
    if scored.gate_failed:
        segment += f"; required criteria not met: {', '.join(scored.failed_gates)} -- the trial fails"
    return JudgeOutcome(
        JudgeStatus.COMPLETED,
        ComponentResult("llm_judge", scored.score, segment),
        judge_report,
        criterion_results=[
            CriterionResult(id=v.id, met=v.met, score=v.score, justification=v.justification)
            for v in report.verdicts
        ],
        gate_failed=scored.gate_failed,
    )


def _one_line(text: str, limit: int = 300) -> str:
    # Grade.reasons is " | "-joined: the judge's own words must not split it.
    flat = " ".join(text.replace("|", "/").split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _report(
    model: JudgeModelConfig, usage: JudgeUsage, messages: list[dict[str, object]], shown: bool
) -> JudgeReport:
    price = model.price
    cost = (
        (
            usage.prompt_tokens * price.prompt_per_million
            + usage.completion_tokens * price.completion_per_million
        )
        / 1e6
        if price is not None
        else 0.0
    )
    return JudgeReport(
        calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        cost_usd=cost,
        tool_calls=usage.tool_calls,
        transcript_json=json.dumps(messages, ensure_ascii=False, default=str),
        include_agent_system_prompt=shown,
    )
