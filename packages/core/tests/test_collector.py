"""tune_collector: what is alive is frozen out of later passes, and young passes come in larger batches."""

from __future__ import annotations

import gc

from tolokaforge.core.collector import THRESHOLDS, tune_collector


def test_tune_collector_freezes_what_is_alive_and_sets_the_thresholds() -> None:
    before = gc.get_threshold()
    survivor: list[list[int]] = [[] for _ in range(1000)]  # tracked containers, alive at the call
    try:
        tune_collector()
        assert gc.get_threshold() == THRESHOLDS
        assert gc.get_freeze_count() >= len(survivor)  # frozen: no later pass walks them
        # A cycle made afterwards is still found and freed.
        cycle: list[object] = []
        cycle.append(cycle)
        gc.collect()
        del cycle
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
