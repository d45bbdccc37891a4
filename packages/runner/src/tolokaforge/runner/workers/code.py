"""What a trial's workers import, and how long a worker may take to start (shared by spawning and forking)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["STARTUP_DEADLINE_S", "WorkerBase", "WorkerCode"]

STARTUP_DEADLINE_S = 60.0
"""How long a worker may take to start, import the task's tools and load its tables."""


@dataclass(frozen=True)
class WorkerCode:
    """What a trial's workers import: the bundle's root, its package name, and the tools by key."""

    root: Path
    package: str
    tools: dict[str, tuple[str, str]] = field(default_factory=lambda: {})
    """``module_path:class_name`` -> (module_path, class_name)."""


@dataclass(frozen=True, eq=False)
class WorkerBase:
    """A task's initial tables, which a zygote holds once for every worker it forks of that task.

    A forked worker starts from the zygote's copy (shared pages, nothing sent) and is sent only the
    tables its trial has changed since: those that are not the very objects of ``tables``.
    """

    full_hash: str
    """The initial state's full hash: the name the zygote holds it under."""
    tables: dict[str, Any]
    """The runner's shared initial tables (never changed in place)."""
    file: Path
    """The same tables as JSON, where a zygote that does not hold them yet reads them."""

    def overlay(self, tables: dict[str, Any]) -> dict[str, Any]:
        """The tables of ``tables`` a worker forked from this base must be sent."""
        return {name: table for name, table in tables.items() if table is not self.tables.get(name)}
