"""Every telecom task of τ² (the full set: 2,285), golden, graded here as τ²'s own evaluator grades it.

Telecom's tasks start with initialization actions, their golden paths mix agent calls and the user's
device calls, and their reward is τ²'s env assertions (and, for some, its action matching).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .golden_parity import check_golden_domain

pytest.importorskip("tau2.evaluator.evaluator")


def test_every_telecom_task_golden_scores_as_tau2_scores_it(tmp_path: Path) -> None:
    pack = check_golden_domain("tau2:telecom", tmp_path, split="full")
    assert len(pack.tasks) == 2285
