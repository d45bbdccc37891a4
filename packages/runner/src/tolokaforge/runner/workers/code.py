"""What a trial's workers import, and how long a worker may take to start (shared by spawning and forking)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["STARTUP_DEADLINE_S", "WorkerCode"]

STARTUP_DEADLINE_S = 60.0
"""How long a worker may take to start, import the task's tools and load its tables."""


@dataclass(frozen=True)
class WorkerCode:
    """What a trial's workers import: the bundle's root, its package name, and the tools by key."""

    root: Path
    package: str
    tools: dict[str, tuple[str, str]] = field(default_factory=lambda: {})
    """``module_path:class_name`` -> (module_path, class_name)."""
