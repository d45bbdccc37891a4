"""grading.yaml -> the runner-form GradingConfig.

The renames are the only translation: ``combine.method`` -> ``combine_method``, ``hash.enabled`` ->
``hash_enabled``, ``hash.weight`` -> ``hash_weight`` and golden actions ``{name, kwargs}`` ->
``{tool_name, arguments}``. The custom-checks file is re-expressed relative to the pack root, because
that is the root of the code bundle the runner receives and where it looks for the file.
"""

from __future__ import annotations

from tolokaforge.core.models import (
    CustomChecksConfig,
    GoldenAction,
    GradingConfig,
    StateChecksConfig,
)

from .files import GradingFile

__all__ = ["to_grading_config"]


def to_grading_config(grading: GradingFile, *, custom_checks_path: str | None) -> GradingConfig:
    """Translate a validated grading file; ``custom_checks_path`` is the checks file relative to the pack root."""
    state_checks = None
    if grading.state_checks is not None:
        hash_block = grading.state_checks.hash
        state_checks = StateChecksConfig(
            hash_enabled=hash_block.enabled if hash_block else False,
            hash_weight=hash_block.weight if hash_block else None,
            golden_actions=[
                GoldenAction(tool_name=action.name, arguments=action.kwargs)
                for action in (hash_block.golden_actions if hash_block else [])
            ],
            jsonpaths=grading.state_checks.jsonpaths,
        )
    custom_checks = None
    if grading.custom_checks is not None:
        block = grading.custom_checks
        custom_checks = CustomChecksConfig(
            enabled=block.enabled,
            file=custom_checks_path or block.file,
            timeout_seconds=block.timeout_seconds,
            fail_on_error=block.fail_on_error,
        )
    return GradingConfig(
        combine_method=grading.combine.method,
        weights=grading.combine.weights,
        pass_threshold=grading.combine.pass_threshold,
        state_checks=state_checks,
        transcript_rules=grading.transcript_rules,
        llm_judge=grading.llm_judge,
        custom_checks=custom_checks,
        trace_checks=grading.trace_checks,
    )
