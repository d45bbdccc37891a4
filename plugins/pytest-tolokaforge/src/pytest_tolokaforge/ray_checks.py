"""``--tolokaforge-ray ADDRESS``: the per-task checks of every pack run on a Ray cluster.

Once collection is final (``-k`` applied), :meth:`RayChecks.select` notes which checks of which task
were selected. The first per-task item to run sends those tasks to a pool of :class:`CheckWorker`
actors (one per CPU of the cluster, tasks dealt round-robin; each pack is put in the object store
once). A worker runs the selected checks of a task, in the usual order, against its own embedded
runner, and returns each check's verdict. Every item then waits only for its own task and reports
the verdict as if it had run here: same ids, same failure text, same notes. The runner-contract and
provider items still run in this process. Ray is imported only when the option is given.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from tolokaforge.host import Pack, ray_connection

from .checks import TASK_CHECKS, TaskContext
from .errors import CheckFailure
from .options import TASK_CHECKS as TASK_CHECK_ORDER
from .options import Settings
from .session import ToloSession

__all__ = ["RAY_KEY", "CheckWorker", "RayChecks", "Verdict"]

WORKER_TIMEOUT_S = 600.0
"""How long one check may take on a worker (the local item's own budget)."""


@dataclass(frozen=True)
class Verdict:
    notes: tuple[str, ...] = ()
    failure: tuple[str, str] | None = None
    """``(summary, details)`` of a CheckFailure."""
    error: str | None = None
    """Anything else the check raised (a bug in the check or the harness), as ``Type: message``."""


class CheckWorker:
    """A Ray actor (made one by :class:`RayChecks`): its own session, embedded runner and loop."""

    def __init__(self, checks: frozenset[str]) -> None:
        self._session = ToloSession(Settings(packs=(), runner=None, checks=checks))

    def check_task(self, pack: Pack, task_id: str, checks: frozenset[str]) -> dict[str, Verdict]:
        context = TaskContext(self._session, pack, pack.task(task_id))
        verdicts: dict[str, Verdict] = {}
        for name in (name for name in TASK_CHECK_ORDER if name in checks):
            try:
                notes = self._session.run(TASK_CHECKS[name](context), timeout=WORKER_TIMEOUT_S)
            except CheckFailure as failure:
                verdicts[name] = Verdict(failure=(failure.summary, failure.details))
            except Exception as error:
                verdicts[name] = Verdict(error=f"{type(error).__name__}: {error}")
            else:
                verdicts[name] = Verdict(notes=tuple(notes))
        return verdicts


@dataclass
class RayChecks:
    """The session's Ray side: connection, workers and one result per (pack root, task id)."""

    address: str
    checks: frozenset[str]
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _workers: list[Any] = field(default_factory=list[Any])
    _results: dict[tuple[str, str], Any] = field(default_factory=dict[tuple[str, str], Any])
    _selected: dict[tuple[str, str], tuple[Pack, set[str]]] = field(
        default_factory=dict[tuple[str, str], tuple[Pack, set[str]]]
    )
    connection: str | None = None
    """How the session reached the cluster, once it has (for the terminal summary)."""

    def select(self, pack: Pack, task_id: str, check: str) -> None:
        """``check`` of ``task_id`` is one of the session's items (called once collection is final)."""
        self._selected.setdefault((str(pack.root), task_id), (pack, set()))[1].add(check)

    def _submit(self) -> None:
        self.connection = self._stack.enter_context(ray_connection(self.address))
        import ray  # after ray_connection: the host sets Ray's environment before the first import

        api = cast(Any, ray)
        cpus = int(cast(dict[str, float], api.cluster_resources()).get("CPU", 1.0))
        actor = api.remote(CheckWorker).options(num_cpus=1, max_restarts=1, max_task_retries=1)
        self._workers = [actor.remote(self.checks) for _ in range(max(cpus, 1))]
        self._stack.callback(self._kill, api)
        stored: dict[str, Any] = {}
        for dealt, (key, (pack, checks)) in enumerate(self._selected.items()):
            if key[0] not in stored:
                stored[key[0]] = api.put(pack)
            worker = self._workers[dealt % len(self._workers)]
            self._results[key] = worker.check_task.remote(stored[key[0]], key[1], frozenset(checks))

    def _kill(self, api: Any) -> None:
        for worker in self._workers:
            with contextlib.suppress(Exception):
                api.kill(worker)
        self._workers = []

    async def run(self, context: TaskContext, check: str) -> list[str]:
        """The verdict of ``check`` on ``context``'s task, computed on the cluster."""
        if not self._results:
            self._submit()
        verdicts = cast(
            dict[str, Verdict], await self._results[(str(context.pack.root), context.loaded.task_id)]
        )
        verdict = verdicts[check]
        if verdict.failure is not None:
            raise CheckFailure(*verdict.failure)
        if verdict.error is not None:
            raise CheckFailure(f"the check raised on its Ray worker: {verdict.error}")
        return list(verdict.notes)

    @property
    def workers(self) -> int:
        return len(self._workers)

    def close(self) -> None:
        self._stack.close()


RAY_KEY = pytest.StashKey[RayChecks]()
"""Where pytest_configure keeps the session's RayChecks (absent without --tolokaforge-ray)."""
