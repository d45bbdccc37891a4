"""Golden runs of a whole τ² domain, checked against τ²'s own evaluator (the test_golden_*.py modules).

Every task of the domain's split runs with the golden agent (and the stand-in user) on the embedded
runner, in the sandbox, as ``tolokaforge run --pack tau2:<domain>`` runs it; the run is exported in
τ²'s format and τ²'s ``evaluate_simulation`` must give every simulation the reward and the breakdown
our grade gave (parity.py). Every golden trial must also pass: τ²'s golden actions plus the
communicate strings reach reward 1 on every task of this τ² release.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.packs import Pack, inspect_pack, load_pack
from tolokaforge.host.results.tau2_export import export_tau2_results
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

from .parity import assert_tau2_parity

__all__ = ["check_golden_domain"]


def check_golden_domain(
    spec: str, tmp_path: Path, *, split: str | None = None, shard: tuple[int, int] = (0, 1)
) -> Pack:
    """Run every task of ``spec`` golden, export, and hold τ²'s evaluator to our grades; the pack run.

    ``shard`` (i, n): only every n-th task from the i-th, so a big domain's check is n test modules that
    pytest-xdist can run side by side; together the n shards run every task once.
    """
    # inspect_pack: the tasks that load (mock's message-history tasks are refused by name elsewhere)
    pack = inspect_pack(Path(spec)).pack if split is None else load_pack(Path(spec), split=split)
    index, count = shard
    selected = tuple(loaded.task.task_id for loaded in pack.tasks[index::count])
    summary = asyncio.run(
        run_pack(
            pack,
            GoldenAgentFactory(),
            UserRouter(stand_in=True),
            RunSettings(output=tmp_path / "run", concurrency=16, task_ids=selected if count > 1 else ()),
        )
    )
    failed = summary.not_passed()
    assert not failed and len(summary.rows) == len(selected), f"{len(failed)} golden trials did not pass"
    results = assert_tau2_parity(export_tau2_results(tmp_path / "run", tmp_path / "results.json"), summary)
    assert len(results.simulations) == len(selected)
    assert all(simulation.reward_info.reward == 1.0 for simulation in results.simulations)
    return pack
