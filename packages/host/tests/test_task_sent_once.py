"""The host sends each task to a runner once, then registers its other trials by digest."""

from __future__ import annotations

from pathlib import Path

from tolokaforge.host.packs import load_pack
from tolokaforge.host.runner_client import RunnerClient
from tolokaforge.host.trial_spec import build_trial_spec
from tolokaforge.runner import start_runner
from tolokaforge.runner.task_cache import TaskCache

RETAIL = Path(__file__).parents[3] / "examples" / "packs" / "retail"


async def test_trials_of_one_task_share_one_copy_and_a_forgetful_runner_is_sent_it_again() -> None:
    pack = load_pack(RETAIL)
    first, second = pack.tasks[0].task, pack.tasks[1].task
    runner = await start_runner()
    client = RunnerClient(runner.host, runner.port)
    registry = runner.servicer.registry
    try:
        specs = [build_trial_spec(first, run_id="r", trial_index=i) for i in range(3)]
        specs.append(build_trial_spec(second, run_id="r", trial_index=0))
        registered = [await client.register(spec) for spec in specs]
        assert len(registry.tasks) == 2  # one parsed copy per task, however many trials
        assert registered[0].agent_tools == registered[2].agent_tools
        # Every trial of the first task starts from the same (shared) initial tables.
        contexts = [registry.get(spec.trial_id) for spec in specs[:3]]
        assert all(trial.initial_tables is contexts[0].initial_tables for trial in contexts)

        registry.tasks = TaskCache()  # the runner forgot: it answers TASK_NOT_CACHED, the host resends
        again = await client.register(build_trial_spec(first, run_id="r", trial_index=3))
        assert again.agent_tools == registered[0].agent_tools
        assert len(registry.tasks) == 1
    finally:
        client.close()
        await runner.close()
