"""A registered trial: its spec and call history, and what it holds, grouped by the layer that uses it.

* :class:`TrialState` -- its tables (the mirror of the store) and where grading's golden replay starts;
* :class:`TrialTools` -- the tools it offers and the out-of-process sources behind some of them;
* :class:`TrialProcesses` -- how its processes are confined, its cgroup, its tool workers;
* :class:`TrialFiles` -- its workspace and its task's code on this runner;
* :class:`TrialBrowser` -- its browser page (web tasks) and what the page's site requests did.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tolokaforge.core.models import TrialSpec
from tolokaforge.core.transcript.recorded import RecordedToolCall

from ..errors import ToolFailure
from ..process.cgroups import TrialCgroup
from ..process.confinement import Confinement
from ..state.mirror import TrialMirror
from ..tools import ToolRegistry
from ..tools.reactions import CircuitBreaker
from ..tools.remote import ToolSourceSession
from ..workers.slots import TrialWorkers
from ..workers.worker import WorkerCode
from .web import WebRecord

if TYPE_CHECKING:
    from ..browser import BrowserSession
    from ..browser.pages import SiteResponse
    from .golden_memo import GoldenMemo
    from .task_cache import KnownTask

__all__ = [
    "INITIALIZED_SNAPSHOT",
    "TrialBrowser",
    "TrialContext",
    "TrialFiles",
    "TrialProcesses",
    "TrialState",
    "TrialTools",
]

INITIALIZED_SNAPSHOT = "tolokaforge.initialized"
"""The store snapshot of a trial's state right after its initialization actions ran."""


@dataclass
class TrialState:
    mirror: TrialMirror
    initial_tables: dict[str, Any] = field(default_factory=lambda: {})
    """The task's initial tables, shared with every trial of the task: never changed in place."""
    initial_hash: str | None = None
    """The initial tables' full hash (the store's name for them), once known."""
    has_initialized_snapshot: bool = False
    initialized_tables: dict[str, Any] | None = None
    """The tables right after the initialization actions (the store's INITIALIZED snapshot), shared."""

    @property
    def start_tables(self) -> dict[str, Any]:
        """Where golden replay starts: the initialised tables, or the initial ones."""
        return self.initial_tables if self.initialized_tables is None else self.initialized_tables


@dataclass
class TrialTools:
    agent: ToolRegistry
    user: ToolRegistry
    default_timeout_s: float
    sources: list[ToolSourceSession] = field(default_factory=lambda: [])
    """Out-of-process tool sources (MCP servers, providers) whose processes this trial owns."""
    breakers: dict[str, CircuitBreaker] = field(default_factory=lambda: {})
    """One circuit breaker per source, by identity: crashes that recur open it."""
    shared: KnownTask | None = None
    """Its task, when these tools are exactly the task's shared ones (no tool server added any): their
    schemas are then built once for all of the task's trials."""

    def registry(self, executor: str) -> ToolRegistry | None:
        return {"agent": self.agent, "user": self.user}.get(executor)

    def breaker(self, identity: str) -> CircuitBreaker:
        return self.breakers.setdefault(identity, CircuitBreaker())


@dataclass
class TrialProcesses:
    confinement: Confinement = field(default_factory=Confinement.process)
    """How the trial's processes are confined (the runner's; process/confinement.py)."""
    cgroup: TrialCgroup | None = None
    """The cgroup every process of the trial runs in (sandboxed, where cgroups hold); removed at cleanup."""
    worker_code: WorkerCode | None = None
    """What the trial's tool workers import (isolated mode); None when it has no python tools."""
    workers: TrialWorkers | None = None
    """The trial's tool worker processes (isolated mode), started by the executor."""


@dataclass
class TrialFiles:
    workspace: Path | None = None
    """The trial's own directory (tool providers work inside it); removed at cleanup."""
    code_root: Path | None = None
    """Where the task's code bundle lives on this runner (custom checks are found there)."""
    code_package: str | None = None
    """The bundle's package name, which digests its root and content: the code's identity."""


@dataclass
class TrialBrowser:
    """One browser page of a trial (calls/browser_calls.py): opened at its first ``browser`` call.

    Golden replay swaps in a fresh one for its duration. The page's requests to the task's site are
    answered only while a call drives it (``driving``), one at a time (``site_lock``), so the site
    changes the trial's tables only under the trial's lock.
    """

    session: BrowserSession | None = None
    site_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    driving: bool = False
    site_requests: set[asyncio.Future[SiteResponse]] = field(default_factory=lambda: set())
    """Site requests being answered (each in a task of its own); a call ends once they are done."""
    site_mutations: int = 0
    """Table operations committed by the site during the current call."""
    ends_at: float = 0.0
    """When the current call's budget ends (the event loop's clock): a site request gets no more."""
    site_lost: ToolFailure | None = None
    """An infrastructure failure (the store) met while answering a site request in the current call."""


@dataclass
class TrialContext:
    """Everything the runner holds for one trial. Calls on one trial run one at a time (``lock``)."""

    spec: TrialSpec
    state: TrialState
    tools: TrialTools
    processes: TrialProcesses = field(default_factory=TrialProcesses)
    files: TrialFiles = field(default_factory=TrialFiles)
    history: list[RecordedToolCall] = field(default_factory=lambda: [])
    golden_memo: GoldenMemo | None = None
    """The task's golden replays, shared by its trials (None: this trial replays its own)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    web: WebRecord = field(default_factory=WebRecord)
    """What the trial's recorded ``browser`` calls saw (web checks read it)."""
    browser: TrialBrowser = field(default_factory=TrialBrowser)

    @property
    def trial_id(self) -> str:
        return self.spec.trial_id

    def next_sequence(self) -> int:
        return len(self.history)
