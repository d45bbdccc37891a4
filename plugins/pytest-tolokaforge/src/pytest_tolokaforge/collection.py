"""The collection tree: pack -> task -> one item per check, and the runner's contract items.

pytest's "non-python tests" pattern, reached from the session rather than from files on disk (a pack
may live anywhere, and the plugin does nothing without ``--tolokaforge-pack``)::

    tolokaforge[<pack>]                 PackNode (a Collector at the pack root; not a File, so
                                        --lf/--sw do not skip it for its path)
      <task_id>                         TaskNode
        load / golden / resolve / ...   CheckItem
      pack.yaml                         TaskNode for problems of the pack as a whole
    tolokaforge-runner                  RunnerNode
      health_check / ...                CheckItem
    tolokaforge-provider[<name>]        ProviderNode (per --tolokaforge-provider; Describe's name, or
                                        the command line when the provider does not answer)
      describe / schema / unknown_operation /    ProviderItem
      authentication / configure_once
      <operation>::declares / ::invalid_arguments ProviderItem (OperationNode <operation>)

Ids read ``tolokaforge[retail]::write_cancel_processing_order::golden``, so ``-k <task_id>`` selects a
task and ``-k golden`` a check. A task the loader refused gets only its ``load`` item, failing with
the loader's problems.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tolokaforge.contracts.tool import OperationSchema
from tolokaforge.host import LoadedTask, PackProblem, PackReport

from .checks import RUNNER_CHECKS, TASK_CHECKS, RunnerCheck, TaskCheck, TaskContext
from .checks.provider_contract import OPERATION_CHECKS, PROVIDER_CHECKS, OperationCheck, ProviderCheck
from .errors import CheckFailure
from .options import TASK_CHECKS as TASK_CHECK_ORDER
from .provider import ProviderUnderTest
from .ray_checks import RAY_KEY, RayChecks
from .session import ToloSession, session_of

__all__ = ["CheckItem", "PackNode", "ProviderItem", "ProviderNode", "RunnerNode", "TaskNode", "session_nodes"]

ITEM_TIMEOUT_S = 600.0
PHASES = {"runner": 0, **{name: index + 1 for index, name in enumerate(TASK_CHECK_ORDER)}}
PROVIDER_PHASE = len(PHASES)
"""Run order: the runner's contract first, then check by check across tasks (determinism last)."""

RunCheck = Callable[[], Coroutine[Any, Any, list[str]]]
_N = TypeVar("_N", bound=pytest.Item | pytest.Collector)


def _child(cls: type[_N], parent: pytest.Collector, **kwargs: Any) -> _N:
    """``cls.from_parent`` with its untyped keywords confined to this one place."""
    return cls.from_parent(parent, **kwargs)  # pyright: ignore[reportUnknownMemberType]


def session_nodes(session: pytest.Session, state: ToloSession) -> list[pytest.Collector]:
    """The plugin's top-level collectors, added to the session's own collection."""
    nodes: list[pytest.Collector] = []
    names: set[str] = set()
    for report in state.load_packs():
        name = _unique(f"tolokaforge[{report.pack.name}]", names)
        nodes.append(_child(PackNode, session, path=report.pack.root, name=name, nodeid=name, report=report))
    if "runner" in state.settings.checks and state.settings.packs:
        nodes.append(_child(RunnerNode, session, name="tolokaforge-runner", nodeid="tolokaforge-runner"))
    for argv in state.settings.providers:
        provider = state.provider(argv)
        label = (
            provider.described.name if provider.described and provider.described.name else provider.command
        )
        name = _unique(f"tolokaforge-provider[{label}]", names)
        nodes.append(_child(ProviderNode, session, name=name, nodeid=name, provider=provider))
    return nodes


def _unique(name: str, taken: set[str]) -> str:
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = f"{name}#{number}"
    taken.add(candidate)
    return candidate


class PackNode(pytest.Collector):
    def __init__(self, *, report: PackReport, **kwargs: object) -> None:
        super().__init__(**kwargs)  # pyright: ignore[reportArgumentType, reportUnknownMemberType]
        self.report = report

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        taken: set[str] = set()
        if self.report.pack_problems:
            yield _child(TaskNode, self, name=_unique("pack.yaml", taken), problems=self.report.pack_problems)
        for loaded in self.report.pack.tasks:
            yield _child(TaskNode, self, name=_unique(loaded.task_id, taken), loaded=loaded)
        for broken in self.report.broken:
            yield _child(TaskNode, self, name=_unique(broken.task_id, taken), problems=broken.problems)
        for skipped in self.report.pack.skipped:
            # A task this machine cannot run (docs/terminal.md): reported skipped with its reason, never passed.
            yield _child(SkippedTaskItem, self, name=_unique(skipped.task_id, taken), reason=skipped.reason)


class SkippedTaskItem(pytest.Item):
    """A task of the pack that loads but cannot run here; its one item is skipped, naming why."""

    def __init__(self, *, reason: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # pyright: ignore[reportArgumentType, reportUnknownMemberType]
        self.reason = reason

    def runtest(self) -> None:
        pytest.skip(f"SKIPPED: {self.reason}")

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"tolokaforge skipped {self.name}"


class TaskNode(pytest.Collector):
    def __init__(
        self,
        *,
        loaded: LoadedTask | None = None,
        problems: Sequence[PackProblem] = (),
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)  # pyright: ignore[reportArgumentType, reportUnknownMemberType]
        self.loaded = loaded
        self.problems = tuple(problems)

    def collect(self) -> Iterable[pytest.Item]:
        checks = session_of(self.config).settings.checks
        pack = self.parent
        assert isinstance(pack, PackNode)
        if self.loaded is None:
            if "load" in checks:
                yield _child(
                    CheckItem, self, name="load", check="load", task=self.name, run=_problems(self.problems)
                )
            return
        context = TaskContext(session_of(self.config), pack.report.pack, self.loaded)
        on_ray = self.config.stash.get(RAY_KEY, None)
        for check in TASK_CHECK_ORDER:
            if check in checks:
                function = TASK_CHECKS[check]
                yield _child(
                    CheckItem,
                    self,
                    name=check,
                    check=check,
                    task=self.name,
                    run=_bind_task(function, context)
                    if on_ray is None
                    else _bind_ray(on_ray, context, check),
                )


def _bind_task(function: TaskCheck, context: TaskContext) -> RunCheck:
    return lambda: function(context)


def _bind_ray(on_ray: RayChecks, context: TaskContext, check: str) -> RunCheck:
    return lambda: on_ray.run(context, check)


def _bind_runner(function: RunnerCheck, state: ToloSession) -> RunCheck:
    return lambda: function(state)


def _problems(problems: Sequence[PackProblem]) -> RunCheck:
    async def run() -> list[str]:
        lines = [str(problem) for problem in problems]
        more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
        raise CheckFailure(f"does not load: {lines[0]}{more}", "\n".join(["does not load:", *lines]))

    return run


class RunnerNode(pytest.Collector):
    def collect(self) -> Iterable[pytest.Item]:
        state = session_of(self.config)
        for name, function in RUNNER_CHECKS.items():
            yield _child(
                CheckItem, self, name=name, check="runner", task="", run=_bind_runner(function, state)
            )


class _CheckRun(pytest.Item):
    """An item that runs one check on the session's loop and fails with the check's own account (its
    report: plugin.py's pytest_runtest_makereport)."""

    _run: RunCheck

    def runtest(self) -> None:
        try:
            notes = session_of(self.config).run(self._run(), timeout=ITEM_TIMEOUT_S)
        except CheckFailure as failure:
            self.user_properties.append(("tolokaforge_reason", failure.summary))
            raise
        self.user_properties.extend(("tolokaforge_note", note) for note in notes)


class CheckItem(_CheckRun):
    """One check of one task (or of the runner). Fails with the check's own account of what is wrong."""

    def __init__(self, *, check: str, task: str, run: RunCheck, **kwargs: object) -> None:
        super().__init__(**kwargs)  # pyright: ignore[reportArgumentType, reportUnknownMemberType]
        self.check = check
        self.task = task
        self._run = run
        self.phase = PHASES[check]
        pack = self.parent.parent if check != "runner" and self.parent is not None else None
        self.group = f"{pack.name}::{task}" if pack is not None else "tolokaforge-runner"
        self.user_properties.append(("tolokaforge_group", self.group))
        self.user_properties.append(("tolokaforge_check", self.name))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        what = f"{self.check} {self.task}" if self.task else self.name
        return self.path, None, f"tolokaforge {what}"


class ProviderNode(pytest.Collector):
    """One tool provider (started at collection: its operations are its items)."""

    def __init__(self, *, provider: ProviderUnderTest, **kwargs: object) -> None:
        super().__init__(**kwargs)  # pyright: ignore[reportArgumentType, reportUnknownMemberType]
        self.provider = provider

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        for name, function in PROVIDER_CHECKS.items():
            yield _child(
                ProviderItem, self, name=name, subject=self.name, run=_bind_provider(function, self.provider)
            )
        schema = self.provider.schema
        if schema is None:
            return
        taken: set[str] = set()
        for operation in schema.operations:
            yield _child(
                OperationNode, self, name=_unique(operation.name or "<unnamed>", taken), operation=operation
            )


class OperationNode(pytest.Collector):
    def __init__(self, *, operation: OperationSchema, **kwargs: object) -> None:
        super().__init__(**kwargs)  # pyright: ignore[reportArgumentType, reportUnknownMemberType]
        self.operation = operation

    def collect(self) -> Iterable[pytest.Item]:
        provider = self.parent
        assert isinstance(provider, ProviderNode)
        for name, function in OPERATION_CHECKS.items():
            run = _bind_operation(function, provider.provider, self.operation)
            yield _child(ProviderItem, self, name=name, subject=self.name, run=run)


def _bind_provider(function: ProviderCheck, provider: ProviderUnderTest) -> RunCheck:
    return lambda: function(provider)


def _bind_operation(
    function: OperationCheck, provider: ProviderUnderTest, operation: OperationSchema
) -> RunCheck:
    return lambda: function(provider, operation)


class ProviderItem(_CheckRun):
    """One check of a tool provider (or of one of its operations)."""

    def __init__(self, *, subject: str, run: RunCheck, **kwargs: object) -> None:
        super().__init__(**kwargs)  # pyright: ignore[reportArgumentType, reportUnknownMemberType]
        self.subject = subject
        self._run = run
        self.phase = PROVIDER_PHASE
        parent = self.parent
        node = parent if isinstance(parent, ProviderNode) else parent.parent if parent is not None else None
        self.group = node.name if isinstance(node, ProviderNode) else subject
        check = self.name if subject == self.group else f"{subject}::{self.name}"
        self.user_properties.append(("tolokaforge_group", self.group))
        self.user_properties.append(("tolokaforge_check", check))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"tolokaforge {self.name} {self.subject}"
