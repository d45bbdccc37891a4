"""Checks over the plain values: ctx.effects and ctx.initial_state show them as written in json_db."""

from __future__ import annotations

from tolokaforge.core.grading.checks_helpers import count_tool_calls
from tolokaforge.core.grading.checks_interface import CheckContext, CheckFailed, CheckPassed, check, init

_ctx: CheckContext | None = None


@init(interface_version="1.0")
def setup(ctx: CheckContext) -> None:
    global _ctx
    _ctx = ctx


def _context() -> CheckContext:
    assert _ctx is not None
    return _ctx


@check
def counter_went_up_by_five() -> CheckPassed | CheckFailed:
    before = _context().initial_state.get("counter")
    after = _context().effects["counter"]
    if before == 0 and after == 5:
        return CheckPassed(f"counter {before} -> {after}")
    return CheckFailed(f"counter {before} -> {after}, expected 0 -> 5")


@check
def notes_are_plain_strings() -> CheckPassed | CheckFailed:
    notes = _context().effects["notes"]
    if notes == ["opened", "added 5"]:
        return CheckPassed("notes kept as written")
    return CheckFailed(f"notes are {notes!r}")


@check
def counter_tool_called_once() -> CheckPassed | CheckFailed:
    calls = count_tool_calls(_context().tool_calls, "update_counter")
    return CheckPassed("called once") if calls == 1 else CheckFailed(f"update_counter called {calls} times")
