"""The rubric judge: what a pack writes (``llm_judge`` in grading.yaml) and what a run sets (the model).

The pack owns the rubric; the run owns the judge model. :class:`LLMJudgeConfig` is the former,
carried in ``TaskDescription.grading.llm_judge``; :class:`JudgeModelConfig` the latter, carried in
``TrialSpec.judge_model``. Neither ever holds a secret: the runner reads the API key from its own
environment, from the first variable of ``api_key_env`` that is set (see docs/judge.md).
"""

from __future__ import annotations

import re
from typing import Any, Literal, cast

from pydantic import Field, model_validator

from ._base import SpecModel

__all__ = [
    "DEFAULT_JUDGE_KEY_ENV",
    "MOCK_JUDGE_MODEL",
    "Criterion",
    "JudgeCustomization",
    "JudgeModelConfig",
    "JudgePrice",
    "LLMJudgeConfig",
    "Rubric",
    "mock_unmet_criteria",
]

MOCK_JUDGE_MODEL = "tolokaforge-mock-judge"
"""The deterministic judge the runner answers itself, without a network: every criterion met.
``tolokaforge-mock-judge:unmet=a,b`` reports criteria ``a`` and ``b`` not met (score 0.0)."""

DEFAULT_JUDGE_KEY_ENV = ("TOLOKAFORGE_JUDGE_API_KEY", "TOLOKAFORGE_LLM_API_KEY", "OPENAI_API_KEY")

_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
_RESERVED_SUFFIX = "_justification"


class Criterion(SpecModel):
    """One rubric line the judge decides (grading.yaml: llm_judge.rubric.criteria[])."""

    id: str = Field(pattern=_IDENTIFIER, max_length=64)
    description: str = Field(min_length=1)
    kind: Literal["binary", "graded"] = "binary"
    """binary: met or not (score 1/0); graded: a score in [0, 1], met when it is at least 0.5."""
    required: bool = False
    """A required criterion is a gate, not a share: not met, the component is 0.0 and the trial fails."""
    weight: float = Field(default=1.0, gt=0)
    """Its share of the component among the non-required criteria."""
    expected: str | None = None
    """What a correct agent does or says here, written by the author (never the golden answer)."""

    @model_validator(mode="after")
    def _not_a_report_key(self) -> Criterion:
        if self.id == "reasons" or self.id.endswith(_RESERVED_SUFFIX):
            raise ValueError(
                f"criterion id {self.id!r} collides with the judge's report keys "
                f"('reasons' and '<id>{_RESERVED_SUFFIX}'); choose another id"
            )
        return self


class Rubric(SpecModel):
    """grading.yaml: llm_judge.rubric."""

    reference: str | None = None
    """An author-written reference answer the judge may compare against."""
    criteria: list[Criterion] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> Rubric:
        seen: set[str] = set()
        for criterion in self.criteria:
            if criterion.id in seen:
                raise ValueError(f"criterion id {criterion.id!r} appears twice")
            seen.add(criterion.id)
        return self


class JudgeCustomization(SpecModel):
    """grading.yaml: llm_judge.customization."""

    system_prompt: str | None = Field(default=None, min_length=1)
    """Replaces the judge's default instructions (the report contract is always appended)."""
    include_agent_system_prompt: bool = True
    """False keeps the agent's system prompt out of the judge's evidence."""


_LEGACY_HINTS = {
    "model_ref": "the judge model is a run setting now: drop model_ref and pass `tolokaforge run --judge-model M`",
    "output_schema": "the judge's report shape is fixed by the rubric: drop output_schema",
}


class LLMJudgeConfig(SpecModel):
    """grading.yaml: llm_judge (TaskDescription.grading.llm_judge)."""

    rubric: Rubric
    customization: JudgeCustomization = Field(default_factory=JudgeCustomization)

    @model_validator(mode="before")
    @classmethod
    def _refuse_legacy_shapes(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        block = cast(dict[str, Any], data)
        problems = [hint for key, hint in _LEGACY_HINTS.items() if key in block]
        rubric = block.get("rubric")
        if isinstance(rubric, str | list):
            shape = "a string" if isinstance(rubric, str) else "a list"
            problems.append(
                f"llm_judge.rubric is {shape}; write rubric: {{reference: ..., criteria: [{{id, description, "
                "kind: binary|graded, required, weight, expected}]}} with one criterion per thing to judge"
            )
        if problems:
            raise ValueError("legacy llm_judge shape: " + "; ".join(problems))
        return block


class JudgePrice(SpecModel):
    """USD per million tokens, resolved by the host from the run's price table."""

    prompt_per_million: float = Field(ge=0)
    completion_per_million: float = Field(ge=0)


class JudgeModelConfig(SpecModel):
    """TrialSpec.judge_model: which model judges, where it is served, and the judge's budgets.

    Defaults (also in docs/judge.md): 12 turns, 180 seconds in all, 2 malformed reports returned to
    the judge before it is ERRORED, 60 seconds and 2 retries per HTTP request.
    """

    model: str = Field(min_length=1)
    """An ``anthropic/`` prefix selects Anthropic's Messages API; any other name is OpenAI-compatible."""
    base_url: str = "https://api.openai.com/v1"
    api_key_env: list[str] = Field(default_factory=lambda: list(DEFAULT_JUDGE_KEY_ENV), min_length=1)
    """Names of environment variables of the runner's process; the first one set holds the key."""
    temperature: float | None = Field(default=None, ge=0)
    seed: int | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    reasoning_effort: str | None = None
    price: JudgePrice | None = None
    """None: the run's price table has no price for this model (the host reports the cost unknown)."""
    max_turns: int = Field(default=12, gt=0)
    """LLM calls the judge may make in all."""
    max_seconds: float = Field(default=180.0, gt=0)
    """Wall-clock budget of the whole judgement."""
    max_report_retries: int = Field(default=2, ge=0)
    """Malformed or inconsistent reports returned to the judge as a tool error before it is ERRORED."""
    request_timeout_s: float = Field(default=60.0, gt=0)
    max_http_retries: int = Field(default=2, ge=0)
    """Retries of one request on HTTP 429/5xx or a timeout (other failures are not retried)."""
    backoff_s: float = Field(default=1.0, ge=0)

    @model_validator(mode="after")
    def _mock_name_parses(self) -> JudgeModelConfig:
        if self.is_mock:
            mock_unmet_criteria(self.model)
        return self

    @property
    def is_mock(self) -> bool:
        return self.model == MOCK_JUDGE_MODEL or self.model.startswith(MOCK_JUDGE_MODEL + ":")


def mock_unmet_criteria(model: str) -> set[str]:
    """The criteria ``tolokaforge-mock-judge:unmet=a,b`` reports not met; refuses any other suffix."""
    if model == MOCK_JUDGE_MODEL:
        return set()
    suffix = model.removeprefix(MOCK_JUDGE_MODEL + ":")
    match = re.fullmatch(r"unmet=([A-Za-z0-9_,]+)", suffix)
    if match is None:
        raise ValueError(
            f"mock judge model {model!r}: expected {MOCK_JUDGE_MODEL} or {MOCK_JUDGE_MODEL}:unmet=ID,ID"
        )
    return {part for part in match.group(1).split(",") if part}
