"""The judge's config models: the rubric's rules, the mock model's names, the defaults docs/judge.md states."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tolokaforge.core.models import (
    DEFAULT_JUDGE_KEY_ENV,
    GradingConfig,
    JudgeModelConfig,
    LLMJudgeConfig,
    mock_unmet_criteria,
)


def test_defaults_are_the_documented_ones() -> None:
    config = JudgeModelConfig(model="m")
    assert (config.max_turns, config.max_seconds, config.max_report_retries) == (12, 180.0, 2)
    assert (config.request_timeout_s, config.max_http_retries, config.backoff_s) == (60.0, 2, 1.0)
    assert config.api_key_env == list(DEFAULT_JUDGE_KEY_ENV) and config.price is None
    assert DEFAULT_JUDGE_KEY_ENV[0] == "TOLOKAFORGE_JUDGE_API_KEY"
    assert "key" not in JudgeModelConfig.model_fields and "api_key" not in JudgeModelConfig.model_fields


def test_rubric_defaults_and_customization() -> None:
    judge = LLMJudgeConfig.model_validate({"rubric": {"criteria": [{"id": "a", "description": "d"}]}})
    (criterion,) = judge.rubric.criteria
    assert (criterion.kind, criterion.required, criterion.weight, criterion.expected) == (
        "binary",
        False,
        1.0,
        None,
    )
    assert (
        judge.customization.include_agent_system_prompt is True and judge.customization.system_prompt is None
    )


def test_grading_config_refuses_a_legacy_judge_shape() -> None:
    with pytest.raises(ValidationError, match="legacy llm_judge shape"):
        GradingConfig.model_validate(
            {"combine_method": "weighted", "pass_threshold": 1.0, "llm_judge": {"rubric": "be nice"}}
        )


@pytest.mark.parametrize(
    ("model", "unmet"),
    [("tolokaforge-mock-judge", set[str]()), ("tolokaforge-mock-judge:unmet=a,b_2", {"a", "b_2"})],
)
def test_mock_model_names(model: str, unmet: set[str]) -> None:
    assert JudgeModelConfig(model=model).is_mock and mock_unmet_criteria(model) == unmet


def test_a_mock_name_that_does_not_parse_is_refused_and_other_names_are_not_mocks() -> None:
    with pytest.raises(ValidationError, match="expected tolokaforge-mock-judge or"):
        JudgeModelConfig(model="tolokaforge-mock-judge:all")
    assert not JudgeModelConfig(model="tolokaforge-mock-judgement").is_mock
    with pytest.raises(ValidationError):
        JudgeModelConfig(model="m", weight=1)  # type: ignore[call-arg]  # unknown keys refused
