"""Every airline task of τ², golden, graded here exactly as τ²'s own evaluator grades it (golden_parity.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .golden_parity import check_golden_domain

pytest.importorskip("tau2.evaluator.evaluator")


def test_every_airline_task_golden_scores_as_tau2_scores_it(tmp_path: Path) -> None:
    pack = check_golden_domain("tau2:airline", tmp_path)
    assert len(pack.tasks) == 50
