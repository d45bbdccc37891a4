"""Generation settings per role -- the agent, the simulated user, the judge -- from ``--gen ROLE.KEY=VALUE``.

Keys: ``temperature`` (>= 0), ``seed`` (an integer), ``max_tokens`` (> 0) and ``reasoning_effort``
(none, minimal, low, medium, high, xhigh). Each is sent to the provider as its API names it; a key left
unset is not sent, so the provider's default holds. Anthropic's Messages API has no seed and takes no
reasoning effort from us: asking for either with an ``anthropic/`` model is refused before the run,
never dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from tolokaforge.core.llm import split_model

from ..errors import ConfigError

__all__ = ["GEN_KEYS", "REASONING_EFFORTS", "ROLES", "Generation", "check_generation", "parse_generation"]

ROLES = ("agent", "user", "judge")
GEN_KEYS = ("temperature", "seed", "max_tokens", "reasoning_effort")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


@dataclass(frozen=True)
class Generation:
    """One role's settings; None leaves the provider's default."""

    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None

    def recorded(self) -> dict[str, Any]:
        """The settings that are set, as run.yaml records them."""
        return {key: value for key, value in asdict(self).items() if value is not None}

    def over(self, base: Generation) -> Generation:
        """These settings where set, ``base``'s elsewhere."""
        return replace(base, **self.recorded())


def parse_generation(items: Iterable[str]) -> dict[str, Generation]:
    """``--gen`` values by role; a ConfigError names every value that is wrong."""
    found: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for item in items:
        target, equals, raw = item.partition("=")
        role, dot, key = target.strip().partition(".")
        if not equals or not dot:
            problems.append(f"{item!r}: expected ROLE.KEY=VALUE, e.g. agent.temperature=0.2")
            continue
        if role not in ROLES:
            problems.append(f"{item!r}: role {role!r} is not one of {', '.join(ROLES)}")
            continue
        if key not in GEN_KEYS:
            problems.append(f"{item!r}: key {key!r} is not one of {', '.join(GEN_KEYS)}")
            continue
        try:
            found.setdefault(role, {})[key] = _value(key, raw.strip())
        except ValueError as error:
            problems.append(f"{item!r}: {error}")
    if problems:
        raise ConfigError("--gen " + "; ".join(problems))
    return {role: Generation(**settings) for role, settings in found.items()}


def _value(key: str, raw: str) -> float | int | str:
    if key == "temperature":
        value = float(raw)
        if value < 0:
            raise ValueError("temperature must be >= 0")
        return value
    if key in ("seed", "max_tokens"):
        number = int(raw)
        if key == "max_tokens" and number <= 0:
            raise ValueError("max_tokens must be > 0")
        return number
    if raw not in REASONING_EFFORTS:
        raise ValueError(f"reasoning_effort must be one of {', '.join(REASONING_EFFORTS)}")
    return raw


def check_generation(
    role: str, model: str, generation: Generation, where: Sequence[str] = ("--gen",)
) -> None:
    """Refuse settings ``model``'s provider cannot take, naming the role, the key and ``where`` it came from."""
    if split_model(model)[0] != "anthropic":
        return
    refused = [key for key in ("seed", "reasoning_effort") if getattr(generation, key) is not None]
    if refused:
        keys = ", ".join(f"{role}.{key}" for key in refused)
        raise ConfigError(
            f"{' / '.join(where)} {keys}: model {model!r} is served by Anthropic's Messages API, which "
            "takes no seed and no reasoning effort from this harness; remove the setting for this role"
        )
