"""Every mock task of τ² the adapter runs, golden, graded as τ² grades it; the ones it cannot run, named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tolokaforge.host.packs import inspect_pack

from .golden_parity import check_golden_domain

pytest.importorskip("tau2.evaluator.evaluator")


def test_every_mock_task_golden_scores_as_tau2_scores_it(tmp_path: Path) -> None:
    pack = check_golden_domain("tau2:mock", tmp_path)
    assert len(pack.tasks) == 7


def test_tasks_that_start_from_a_message_history_are_refused_by_name() -> None:
    report = inspect_pack(Path("tau2:mock"))
    assert sorted(broken.task_id for broken in report.broken) == [
        "update_task_with_history_and_env_assertions",
        "update_task_with_message_history",
    ]
    assert all("message history" in problem.message for problem in report.problems)
