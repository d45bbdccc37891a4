"""State sync for tool servers that keep the trial's tables in their own process.

Such a server (an MCP server built with tolokaforge.core.tools_interface) is bound to the trial's
mirror: it is given the trial's tables when it starts and after every reset or restore
(:func:`push_state`), and after each call its tables come back through :func:`commit_server_state`,
which writes the difference to the store as one batch. So the store, GetState and the grader always
hold exactly what the server's tools did, and ResetTrial undoes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.contracts.tool import ToolErrorCategory

from ..errors import ToolFailure
from ..state.cow import CowTables, TableShapeError
from ..state.mirror import TrialMirror
from .remote import ToolSourceSession

__all__ = ["StateSyncing", "bind_state", "commit_server_state", "push_state"]


@runtime_checkable
class StateSyncing(Protocol):
    syncs_state: bool
    on_state: Callable[[dict[str, Any]], Awaitable[None]] | None
    current_state: Callable[[], Mapping[str, Any]] | None

    async def push_state(self, tables: Mapping[str, Any]) -> None: ...


async def commit_server_state(mirror: TrialMirror, tables: Mapping[str, Any]) -> None:
    """Make the store (and the mirror) hold ``tables``, the server's whole state, as one batch."""
    data = CowTables(mirror.tables)
    for name, table in tables.items():
        data[name] = table
    try:
        changes = data.changes()
    except TableShapeError as error:
        raise ToolFailure(
            ExecutionStatus.ERROR,
            ToolErrorCategory.UNKNOWN,
            f"the tool server's state does not fit the trial's tables: {error}",
            details={"state_sync": str(error)},
        ) from error
    await mirror.commit(changes)


def bind_state(sources: Sequence[ToolSourceSession], mirror: TrialMirror) -> list[StateSyncing]:
    """Connect each syncing source to ``mirror``; returns the sources that sync."""
    syncing: list[StateSyncing] = []
    for source in sources:
        if isinstance(source, StateSyncing) and source.syncs_state:

            async def on_state(tables: dict[str, Any]) -> None:
                await commit_server_state(mirror, tables)

            source.on_state = on_state
            source.current_state = lambda: mirror.tables
            syncing.append(source)
    return syncing


async def push_state(sources: Sequence[ToolSourceSession], tables: Mapping[str, Any]) -> None:
    """Give every syncing source the trial's tables (after start, reset and restore)."""
    for source in sources:
        if isinstance(source, StateSyncing) and source.syncs_state:
            await source.push_state(tables)
