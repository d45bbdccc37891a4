"""The accounted-keys ledger: every populated scored key must be evaluated or skipped with a reason.

A key that no evaluator accounts for would contribute nothing while the trial still got a grade, so
the RPC fails naming it and the evaluator it expects. Shape keys (how other checks behave, such as
``state_checks.hash.golden_errors``), ``combine.*`` (the aggregation itself) and
``zero_unless_ended_by`` (applied to the folded grade) are not scored keys.
"""

from __future__ import annotations

from tolokaforge.core.models import GradingConfig

from ..errors import UnaccountedKeys
from .component import KeyLedger
from .trace import populated_trace_keys
from .transcript_rules import populated_transcript_keys

__all__ = ["check_ledger", "populated_scored_keys"]

# key prefix -> the runner evaluator its manifest entry expects
_EVALUATORS = {
    "state_checks.hash": "hash replay (grading/hash_replay.py)",
    "state_checks.jsonpaths": "JSONPath checks (grading/jsonpath_checks.py)",
    "state_checks.files": "file checks (grading/file_checks.py)",
    "transcript_rules": "transcript rules (grading/transcript_rules.py)",
    "custom_checks": "custom checks (grading/custom_checks.py)",
    "llm_judge": "the rubric judge (grading/judge/)",
    "trace_checks": "trace checks (grading/trace/)",
    "env_assertions": "env assertions (grading/env_assertions.py)",
    "tau2_actions": "τ² action checks (grading/tau2_rules.py)",
    "tau2_communicate": "τ² communicate checks (grading/tau2_rules.py)",
    "terminal_tests": "the terminal verifier (grading/terminal_tests.py)",
    "web_checks": "web checks (grading/web_checks.py)",
}


def populated_scored_keys(config: GradingConfig) -> list[str]:
    keys: list[str] = []
    state = config.state_checks
    if state is not None:
        if state.hash_enabled:
            keys.append("state_checks.hash.enabled")
        if state.golden_actions:
            keys.append("state_checks.hash.golden_actions")
        if state.jsonpaths:
            keys.append("state_checks.jsonpaths")
        if state.files:
            keys.append("state_checks.files")
    if config.transcript_rules is not None:
        keys.extend(populated_transcript_keys(config.transcript_rules))
    if config.llm_judge is not None:
        keys.append("llm_judge")
    if config.custom_checks is not None:
        keys.append("custom_checks")
    if config.trace_checks is not None:
        keys.extend(populated_trace_keys(config.trace_checks))
    # Each scores even when empty (an empty list is τ²-bench's 1), so the block's presence populates it.
    blocks = {
        "env_assertions": config.env_assertions,
        "tau2_actions": config.tau2_actions,
        "tau2_communicate": config.tau2_communicate,
        "terminal_tests": config.terminal_tests,
        "web_checks": config.web_checks,
    }
    keys.extend(name for name, block in blocks.items() if block is not None)
    return keys


def check_ledger(config: GradingConfig, ledger: KeyLedger) -> None:
    missing = [key for key in populated_scored_keys(config) if not ledger.accounts_for(key)]
    if missing:
        raise UnaccountedKeys([f"{key} (expects {_evaluator(key)})" for key in missing])


def _evaluator(key: str) -> str:
    for prefix, evaluator in _EVALUATORS.items():
        if key == prefix or key.startswith(prefix + "."):
            return evaluator
    return "an evaluator this runner does not have"
