"""The accounted-keys ledger: every populated scored key must be evaluated or skipped with a reason.

A key that no evaluator accounts for would contribute nothing while the trial still got a grade, so
the RPC fails naming it and the evaluator it expects. Shape keys (how other checks behave) and
``combine.*`` (the aggregation itself) are not scored keys.
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
