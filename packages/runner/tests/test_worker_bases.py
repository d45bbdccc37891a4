"""The initial states a runner writes out for its zygotes are remembered in a bounded LRU
(calls/isolated.py): more distinct states than the bound leave it at the bound, and a trial whose state
was forgotten still starts a worker from it (real runner, real zygotes and workers)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tolokaforge.contracts.runner import ExecutionStatus, RunnerServiceStub
from tolokaforge.runner import RunnerHandle
from tolokaforge.runner.calls.isolated import IsolatedRunner

from .conftest import Episode, initial_tables, make_spec, register_request

CAPACITY = 2
STATES = 5


def _tables(index: int) -> dict[str, Any]:
    """Initial tables of their own per index: O-1's total tells the states apart."""
    tables = initial_tables()
    tables["orders"][0]["total"] = 100.0 + index
    return tables


async def _register(stub: RunnerServiceStub, trial_id: str, index: int) -> None:
    spec = make_spec(trial_id, initial_state={"tables": _tables(index)})
    answer = await stub.register_trial(register_request(spec))
    assert answer.success, answer.error


async def _settled(isolated: IsolatedRunner) -> None:
    """Wait (bounded) until the zygotes started ahead of registered trials have their states."""
    for _ in range(1500):
        if not isolated._warming:  # pyright: ignore[reportPrivateUsage]
            return
        await asyncio.sleep(0.02)
    raise AssertionError("zygotes still warming")


def _kept(isolated: IsolatedRunner) -> list[str]:
    return list(isolated._bases)  # pyright: ignore[reportPrivateUsage]


async def _reads_its_own_state(
    runner: RunnerHandle, stub: RunnerServiceStub, trial_id: str, index: int
) -> None:
    read = await Episode(stub, trial_id).call("get_order", {"order_id": "O-1"}, "c1")
    assert read.status == ExecutionStatus.SUCCESS, read.error_message
    assert json.loads(read.output)["total"] == 100.0 + index
    workers = runner.runner.registry.get(trial_id).processes.workers
    assert workers is not None and workers.live()[0].forked, "forked from its state's zygote"


async def test_more_states_than_the_bound_keep_it_and_a_forgotten_state_still_serves(
    runner: RunnerHandle, stub: RunnerServiceStub
) -> None:
    isolated = runner.runner.executor.isolated
    assert isolated.zygotes is not None, "workers are forked here"
    isolated.bases_capacity = CAPACITY
    # The code's first trial loads its tools at registration; the others start their workers lazily.
    for index in range(STATES):
        await _register(stub, f"state{index}:0", index)
    await _settled(isolated)
    hashes = [runner.runner.registry.get(f"state{index}:0").state.initial_hash for index in range(STATES)]
    assert len(set(hashes)) == STATES
    assert _kept(isolated) == hashes[-CAPACITY:], "the least recently used states were forgotten"

    # A trial registered while its state was kept, whose first call comes after it was forgotten.
    await _reads_its_own_state(runner, stub, "state1:0", 1)
    # A trial registered after its state was forgotten.
    await _register(stub, "state2:1", 2)
    await _settled(isolated)
    await _reads_its_own_state(runner, stub, "state2:1", 2)
    assert _kept(isolated) == [hashes[1], hashes[2]]
