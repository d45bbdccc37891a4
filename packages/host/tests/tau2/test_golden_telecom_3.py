"""Telecom golden parity, shard 3 of 3: every third task of τ²'s full set (2,285), from the third.

Telecom's tasks start with initialization actions, their golden paths mix agent calls and the user's
device calls, and their reward is τ²'s env assertions (and, for some, its action matching). The three
shard modules together run every task once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .golden_parity import check_golden_domain

pytest.importorskip("tau2.evaluator.evaluator")


def test_every_third_telecom_task_from_the_third_scores_as_tau2_scores_it(tmp_path: Path) -> None:
    pack = check_golden_domain("tau2:telecom", tmp_path, split="full", shard=(2, 3))
    assert len(pack.tasks) == 2285
