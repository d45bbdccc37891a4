"""``--tolokaforge-pack=tau2:<domain>``: a τ²-bench domain's tasks as contract tests (docs/tau2.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_tolokaforge.options import TASK_CHECKS

if TYPE_CHECKING:
    from conftest import RunPytest

pytest.importorskip("tau2")

REFUSED = ("update_task_with_history_and_env_assertions", "update_task_with_message_history")
"""mock tasks that start from a message history: the adapter names them instead of running them."""


def test_a_tau2_domain_is_collected_and_checked(run_pytest: RunPytest) -> None:
    run = run_pytest("--tolokaforge-pack=tau2:mock")
    outcomes = {nodeid: outcome for nodeid, outcome in run.outcomes.items() if "[tau2-mock]" in nodeid}
    failed = {nodeid for nodeid, outcome in outcomes.items() if outcome != "PASSED"}
    assert failed == {f"tolokaforge[tau2-mock]::{task}::load" for task in REFUSED}, run.output
    passing = {nodeid.split("::")[1] for nodeid in outcomes if nodeid not in failed}
    assert len(passing) == 7
    assert {nodeid.rsplit("::", 1)[1] for nodeid in outcomes} == set(TASK_CHECKS)
    # τ²'s tools check their own arguments: the taxonomy check says so instead of expecting INVALID_ARGUMENTS
    assert "declares validate_arguments: false" in run.output
