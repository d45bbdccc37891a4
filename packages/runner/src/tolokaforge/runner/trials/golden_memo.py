"""A task's golden replay, reused once two trials' replays of it agree.

The golden path's stable hash is a function of where the replay starts (the task's initial tables),
the golden actions and the tools' code: the same for every trial of a task. Replaying it for each
trial costs a fresh tool worker and every golden call again, a third of a golden retail trial's CPU.
So the runner keeps the outcome per task, keyed by the starting state's full hash and the code's
identity, and reuses it once two replays (of two trials) have produced the same stable hash. Two
replays that disagree show a golden path that depends on something else (a clock, a random id, a
file): that key is then replayed for every trial.

Only trials whose whole state lives in the runner's tables are eligible: none with a tool server
(an MCP server or provider keeps state of its own), none with initialization actions (each trial's
initialised state is its own), and the replay must leave the mirror in step with the store.
``tolokaforge-runner --golden-replay trial`` replays for every trial regardless.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["AGREEING_REPLAYS", "GoldenMemo", "GoldenOutcome", "GoldenReplay", "MemoKey"]

AGREEING_REPLAYS = 2
"""Replays with one stable hash (and none with another) before the outcome is reused."""

log = logging.getLogger(__name__)

MemoKey = tuple[str, str]
"""The starting state's full hash and the code bundle's package name (which digests its content)."""

GoldenReplay = Literal["task", "trial"]
"""``task``: a task's golden outcome is reused once two replays agree; ``trial``: every trial replays."""


@dataclass(frozen=True)
class GoldenOutcome:
    stable_hash: str
    tables: Mapping[str, Any]
    """The golden tables (shared, never changed in place), to diff a trial that does not match."""
    base: Mapping[str, Any]
    """The tables the replay started from: a trial starting from the same object shares its records."""


@dataclass
class _Entry:
    outcome: GoldenOutcome
    agreeing: int = 1
    conflicted: bool = False


class GoldenMemo:
    """One task's golden outcomes, by where the replay starts and the code it runs (``MemoKey``)."""

    def __init__(self) -> None:
        self._entries: dict[MemoKey, _Entry] = {}

    def trusted(self, key: MemoKey) -> GoldenOutcome | None:
        """The outcome to reuse for ``key``, once enough replays agreed on it."""
        entry = self._entries.get(key)
        if entry is None or entry.conflicted or entry.agreeing < AGREEING_REPLAYS:
            return None
        return entry.outcome

    def record(self, key: MemoKey, outcome: GoldenOutcome) -> None:
        """Count one real replay's outcome for ``key``."""
        entry = self._entries.get(key)
        if entry is None:
            self._entries[key] = _Entry(outcome)
        elif entry.conflicted:
            return
        elif entry.outcome.stable_hash == outcome.stable_hash:
            entry.agreeing += 1
        else:
            entry.conflicted = True
            log.warning(
                "two replays of one golden path ended in different states (%s, %s): it is replayed "
                "for every trial of this task",
                entry.outcome.stable_hash[:12],
                outcome.stable_hash[:12],
            )
