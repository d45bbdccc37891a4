"""Fold component scores into the grade by the pack's combine method.

- ``weighted``: the weighted mean over the scored components; every scored component must have a
  declared weight (MissingComponentWeight otherwise -- neither 1.0 nor 0.0 would be defensible).
- ``all``: the weakest component; ``any``: the strongest. Neither reads a weight.
A fold with nothing scored decides without reading a score: nothing configured and nothing weighted
passes (the deliberately non-scoring shape); anything else fails, saying what was asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tolokaforge.core.models import CombineMethod

from ..errors import MissingComponentWeight

__all__ = ["FoldResult", "fold"]

_EPSILON = 1e-9  # a weighted mean of exact shares must not miss its threshold by a rounding error


@dataclass(frozen=True)
class FoldResult:
    score: float
    passed: bool
    sentence: str = ""
    """The fold's own account, when it decided without the components' scores."""


def fold(
    method: CombineMethod,
    weights: Mapping[str, float],
    pass_threshold: float,
    scores: Mapping[str, float],
    *,
    configured: list[str],
) -> FoldResult:
    if not scores:
        if not configured and not weights:
            return FoldResult(
                1.0,
                True,
                "no component was configured and no weight names one, so nothing was scored and nothing was owed",
            )
        asked = ", ".join(configured) or f"weights for {', '.join(sorted(weights))}"
        return FoldResult(0.0, False, f"nothing was scored: {asked} asked for a score and none was counted")
    if method == "weighted":
        for component in scores:
            if component not in weights:
                raise MissingComponentWeight(
                    f"{component} was scored and combine.weights declares no weight for it "
                    f"(declared: {', '.join(sorted(weights)) or 'none'})"
                )
        total = sum(weights[c] for c in scores)
        if total <= 0:
            return FoldResult(
                0.0, False, f"the weights of the scored components ({', '.join(sorted(scores))}) sum to zero"
            )
        score = sum(weights[c] * s for c, s in scores.items()) / total
    elif method == "all":
        score = min(scores.values())
    else:
        score = max(scores.values())
    return FoldResult(score, score >= pass_threshold - _EPSILON)
