"""State sync for tool servers that keep the trial's tables in their own process.

Such a server (an MCP server built with tolokaforge.sdk.tools_interface) is bound to the trial's
mirror: it is given the trial's tables when it starts and after every reset or restore
(:func:`push_state`). After a call that succeeded its tables come back (``take_state``) and
:func:`changes_to` gives the difference the executor commits to the store as one batch; after a call that
failed the trial's tables are pushed to it again, so the failed call leaves nothing. So the store,
GetState and the grader always hold exactly what the server's successful calls did, and ResetTrial
undoes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.contracts.tool import ToolErrorCategory

from ..errors import ToolFailure
from ..state.cow import CowTables, TableShapeError
from ..state.mirror import TrialMirror
from .remote import ToolSourceSession

__all__ = ["StateSyncing", "bind_state", "changes_to", "push_state"]


@runtime_checkable
class StateSyncing(Protocol):
    syncs_state: bool
    current_state: Callable[[], Mapping[str, Any]] | None

    @property
    def running(self) -> bool: ...

    async def push_state(self, tables: Mapping[str, Any]) -> None: ...

    def take_state(self) -> dict[str, Any] | None: ...


def changes_to(current: dict[str, Any], tables: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The TableChange batch that turns ``current`` into ``tables`` (every table of the trial's).

    Used for a syncing server's whole state after a call, and to put a trial's pre-call state back
    after a call that failed. Costs the size of the tables compared, so only those paths pay it.
    """
    data = CowTables(current)
    for name, table in tables.items():
        data[name] = table
    try:
        return data.changes()
    except TableShapeError as error:
        raise ToolFailure(
            ExecutionStatus.ERROR,
            ToolErrorCategory.UNKNOWN,
            f"the tool server's state does not fit the trial's tables: {error}",
            details={"state_sync": str(error)},
        ) from error


def bind_state(sources: Sequence[ToolSourceSession], mirror: TrialMirror) -> list[StateSyncing]:
    """Connect each syncing source to ``mirror``; returns the sources that sync."""
    syncing: list[StateSyncing] = []
    for source in sources:
        if isinstance(source, StateSyncing) and source.syncs_state:
            source.current_state = lambda: mirror.tables
            syncing.append(source)
    return syncing


async def push_state(sources: Sequence[ToolSourceSession], tables: Mapping[str, Any]) -> None:
    """Give every syncing source the trial's tables (after start, reset and restore)."""
    for source in sources:
        if isinstance(source, StateSyncing) and source.syncs_state:
            await source.push_state(tables)
