"""The host sends each task to a runner once, then registers its other trials by digest."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.trial_spec import build_trial_spec
from tolokaforge.host.runner import GrpcRunner
from tolokaforge.runner import start_runner
from tolokaforge.runner.edge.task_wire import TaskWire

RETAIL = Path(__file__).parents[3] / "examples" / "packs" / "retail"
Stubs = Callable[..., Any]
"""The ``recording_stub`` fixture (conftest.py): RecordingStub(inner, *, health_delay_s, old)."""


async def test_trials_of_one_task_share_one_copy_and_a_forgetful_runner_is_sent_it_again() -> None:
    pack = load_pack(RETAIL)
    first, second = pack.tasks[0].task, pack.tasks[1].task
    runner = await start_runner()
    client = GrpcRunner.connect(runner.host, runner.port, token=runner.token)
    registry = runner.servicer.runner.registry
    try:
        specs = [build_trial_spec(first, run_id="r", trial_index=i) for i in range(3)]
        specs.append(build_trial_spec(second, run_id="r", trial_index=0))
        registered = [await client.register(spec) for spec in specs]
        assert (
            len(registry.tasks) == len(runner.servicer.tasks) == 2
        )  # one copy per task, however many trials
        assert registered[0].agent_tools == registered[2].agent_tools
        # Every trial of the first task starts from the same (shared) initial tables.
        contexts = [registry.get(spec.trial_id) for spec in specs[:3]]
        assert all(trial.state.initial_tables is contexts[0].state.initial_tables for trial in contexts)

        runner.servicer.tasks = TaskWire()  # the runner forgot: it answers TASK_NOT_CACHED, the host resends
        again = await client.register(build_trial_spec(first, run_id="r", trial_index=3))
        assert again.agent_tools == registered[0].agent_tools
        assert len(runner.servicer.tasks) == 1
    finally:
        await client.aclose()
        await runner.close()


async def test_tasks_with_equal_initial_states_share_one_copy_of_the_tables() -> None:
    pack = load_pack(RETAIL)  # its tasks all start from the same database
    first, second = pack.tasks[0].task, pack.tasks[1].task
    runner = await start_runner()
    client = GrpcRunner.connect(runner.host, runner.port, token=runner.token)
    registry = runner.servicer.runner.registry
    try:
        specs = [
            build_trial_spec(first, run_id="r", trial_index=0),
            build_trial_spec(second, run_id="r", trial_index=0),
            build_trial_spec(second, run_id="r", trial_index=1),
        ]
        for spec in specs:
            await client.register(spec)
        contexts = [registry.get(spec.trial_id) for spec in specs]
        shared = contexts[0].state.initial_tables
        assert all(trial.state.initial_tables is shared for trial in contexts)
        # Even the second task's first trial, registered before its hash was known, works on them.
        for trial in contexts:
            assert all(trial.state.mirror.tables[name] is table for name, table in shared.items())
    finally:
        await client.aclose()
        await runner.close()


async def test_the_first_trials_of_a_run_ask_the_runner_about_digests_once(recording_stub: Stubs) -> None:
    pack = load_pack(RETAIL)
    runner = await start_runner(serve=False)
    stub = recording_stub(runner.servicer, health_delay_s=0.05)
    client = GrpcRunner(stub, address="embedded")
    try:
        specs = [build_trial_spec(loaded.task, run_id="r", trial_index=0) for loaded in pack.tasks[:16]]
        await asyncio.gather(*(client.register(spec) for spec in specs))
        assert stub.health_checks == 1
        assert len(runner.servicer.runner.registry.tasks) == 16  # and every one went by digest
    finally:
        await client.aclose()
        await runner.close()


async def test_a_runs_first_trials_send_the_packs_code_and_tables_once_between_them(
    recording_stub: Stubs,
) -> None:
    pack = load_pack(RETAIL)  # one code bundle, and one database for every task
    runner = await start_runner(serve=False)
    stub = recording_stub(runner.servicer)
    client = GrpcRunner(stub, address="embedded")
    try:
        specs = [
            build_trial_spec(loaded.task, run_id="r", trial_index=i)
            for loaded in pack.tasks[:6]
            for i in range(3)
        ]
        await asyncio.gather(*(client.register(spec) for spec in specs))
        sent = stub.registrations
        assert len(sent) == len(specs)  # none was refused and sent again
        assert sum(bool(request.code_json) for request in sent) == 1
        assert sum(bool(request.tables_json) for request in sent) == 1
        assert sum(bool(request.task_json) for request in sent) == 6  # each task once
        assert all(request.code_digest == sent[0].code_digest for request in sent)
        tasks = runner.servicer.runner.registry.tasks
        assert len(tasks) == 6
        # On the runner, every task refers to one code object and one copy of the tables.
        contexts = [runner.servicer.runner.registry.get(spec.trial_id) for spec in specs]
        assert len({id(trial.spec.task.tool_code) for trial in contexts}) == 1
        assert len({id(trial.state.initial_tables) for trial in contexts}) == 1
    finally:
        await client.aclose()
        await runner.close()


async def test_a_runner_that_forgot_the_parts_is_sent_them_again(recording_stub: Stubs) -> None:
    pack = load_pack(RETAIL)
    runner = await start_runner(serve=False)
    stub = recording_stub(runner.servicer)
    client = GrpcRunner(stub, address="embedded")
    try:
        await client.register(build_trial_spec(pack.tasks[0].task, run_id="r", trial_index=0))
        runner.servicer.tasks = TaskWire()  # restarted: neither the task nor its parts are kept
        again = await client.register(build_trial_spec(pack.tasks[1].task, run_id="r", trial_index=0))
        assert again.agent_tools
        refused, resent = stub.registrations[-2:]
        assert refused.task_json and not refused.code_json  # the host thought the runner kept the code
        assert resent.task_json and resent.code_json and resent.tables_json
    finally:
        await client.aclose()
        await runner.close()
