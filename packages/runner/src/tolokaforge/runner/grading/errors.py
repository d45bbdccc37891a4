"""Why a GradeTrial answers success=false. Each class knows the exact error-table row it produces.

GradingFailure                      the RPC answers success=false with ``str(error)``
├── NotGradeable                    "Trial '<id>' is not gradeable: <Cause>: ..."
├── NotGradeableAsAuthored          "Trial '<id>' cannot be graded as authored: ..."
├── HashGradingFailed               "Hash grading failed: ..." (incl. UnresolvableGoldenAction)
├── UnaccountedKeys                 "Grading config populates scored keys the runner neither ..."
└── (anything else escaping)        "Grading error: ..."
"""

from __future__ import annotations

__all__ = [
    "GradingFailure",
    "HashGradingFailed",
    "MissingComponentWeight",
    "NotGradeable",
    "NotGradeableAsAuthored",
    "UnaccountedKeys",
    "UnresolvableGoldenAction",
]


class GradingFailure(Exception):
    """GradeTrial cannot produce a usable grade; the message is the response's ``error``."""


class NotGradeable(GradingFailure):
    def __init__(self, trial_id: str, cause: BaseException) -> None:
        super().__init__(f"Trial '{trial_id}' is not gradeable: {type(cause).__name__}: {cause}")


class NotGradeableAsAuthored(GradingFailure):
    def __init__(self, trial_id: str, reason: str) -> None:
        super().__init__(f"Trial '{trial_id}' cannot be graded as authored: {reason}")


class HashGradingFailed(GradingFailure):
    def __init__(self, cause: str) -> None:
        super().__init__(f"Hash grading failed: {cause}")


class UnaccountedKeys(GradingFailure):
    def __init__(self, keys: list[str]) -> None:
        super().__init__(
            "Grading config populates scored keys the runner neither evaluated nor recorded a skip for: "
            + "; ".join(keys)
        )
        self.keys = keys


class UnresolvableGoldenAction(ValueError):
    """Golden actions naming no registered tool: every bad one with its index, and the registered set."""


class MissingComponentWeight(ValueError):
    """A component was scored under "weighted" and combine.weights declares no share for it."""
