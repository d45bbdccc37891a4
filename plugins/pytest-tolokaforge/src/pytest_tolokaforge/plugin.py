"""The pytest11 entry point: hooks only; each job lives in its own module.

options.py      --tolokaforge-pack / -runner / -checks / -provider and their ini keys
session.py      the background loop, the runner connection, the inspected packs
ray_checks.py   --tolokaforge-ray: the per-task checks on a Ray cluster's workers
collection.py   pack -> task -> check items (added to the session's collection), runner and provider items
provider.py     a tool provider under test (--tolokaforge-provider): its subprocess and stub
checks/         one module per check
fixtures.py     tolokaforge_pack(s), tolokaforge_runner, tolokaforge_trial
summary.py      the terminal summary

Without a pack or provider option the plugin adds nothing to the run (its fixtures then fail, saying why).
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from .collection import CheckItem, PackNode, ProviderItem, TaskNode, session_nodes
from .errors import CheckFailure, FailureRepr
from .fixtures import tolokaforge_pack, tolokaforge_packs, tolokaforge_runner, tolokaforge_trial
from .options import TASK_CHECKS, add_options, read_settings
from .ray_checks import RAY_KEY, RayChecks
from .session import SESSION_KEY, ToloSession
from .summary import SummaryRecorder

__all__ = [
    "SUMMARY_KEY",
    "tolokaforge_pack",
    "tolokaforge_packs",
    "tolokaforge_runner",
    "tolokaforge_trial",
]

SUMMARY_KEY = pytest.StashKey[SummaryRecorder]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    settings = read_settings(config)
    if settings.active:
        config.stash[SESSION_KEY] = ToloSession(settings)
        if settings.ray is not None:
            config.stash[RAY_KEY] = RayChecks(settings.ray, settings.checks)
        recorder = SummaryRecorder()
        config.stash[SUMMARY_KEY] = recorder
        config.pluginmanager.register(recorder, "tolokaforge-summary")


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    state = collector.config.stash.get(SESSION_KEY, None)
    if state is not None and isinstance(collector, pytest.Session) and report.passed:
        report.result.extend(session_nodes(collector, state))
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A check that finds a broken contract is reported in its own words: a traceback into the check
    would tell a pack author nothing."""
    report = yield
    failure = call.excinfo.value if call.excinfo is not None else None
    if (
        call.when == "call"
        and isinstance(item, CheckItem | ProviderItem)
        and isinstance(failure, CheckFailure)
    ):
        report.longrepr = FailureRepr(failure.summary, failure.details)
    return report


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the plugin's items check by check (stable), leaving every other item where it is."""
    positions = [index for index, item in enumerate(items) if isinstance(item, CheckItem)]
    ours = sorted((items[index] for index in positions), key=lambda item: getattr(item, "phase", 0))
    for index, item in zip(positions, ours, strict=True):
        items[index] = item


def pytest_collection_finish(session: pytest.Session) -> None:
    """With --tolokaforge-ray: tell the Ray side which per-task checks were selected."""
    on_ray = session.config.stash.get(RAY_KEY, None)
    if on_ray is None:
        return
    for item in session.items:
        if isinstance(item, CheckItem) and item.check in TASK_CHECKS and isinstance(item.parent, TaskNode):
            pack, loaded = item.parent.parent, item.parent.loaded
            if isinstance(pack, PackNode) and loaded is not None:
                on_ray.select(pack.report.pack, loaded.task_id, item.check)


_KEPT_VERBOSITY = pytest.StashKey[int]()


@pytest.hookimpl(wrapper=True, trylast=True, specname="pytest_terminal_summary")
def pytest_terminal_summary_untrimmed(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> Generator[None, None, None]:
    """Inside pytest's own summary wrapper, so this runs just before its short test summary: when a
    check failed, the summary lines are not cut to the terminal's width (as with ``-vv``), so each
    failed check shows its whole reason. The outer wrapper below puts the verbosity back."""
    yield
    failed = terminalreporter.stats.get("failed", [])
    if any(isinstance(getattr(report, "longrepr", None), FailureRepr) for report in failed):
        config.stash[_KEPT_VERBOSITY] = config.option.verbose
        config.option.verbose = max(config.option.verbose, 2)


@pytest.hookimpl(wrapper=True, tryfirst=True, specname="pytest_terminal_summary")
def pytest_terminal_summary_restore(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> Generator[None, None, None]:
    yield
    kept = config.stash.get(_KEPT_VERBOSITY, None)
    if kept is not None:
        config.option.verbose = kept
        del config.stash[_KEPT_VERBOSITY]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    recorder = config.stash.get(SUMMARY_KEY, None)
    if recorder is not None:
        recorder.write(terminalreporter)
    on_ray = config.stash.get(RAY_KEY, None)
    if on_ray is not None and on_ray.connection is not None:
        terminalreporter.write_line(
            f"tolokaforge: per-task checks ran on {on_ray.workers} Ray workers ({on_ray.connection})"
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    on_ray = config.stash.get(RAY_KEY, None)
    if on_ray is not None:
        on_ray.close()
    state = config.stash.get(SESSION_KEY, None)
    if state is not None:
        state.close()
