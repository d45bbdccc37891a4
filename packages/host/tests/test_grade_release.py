"""The host asks GradeTrial to release the trial, and sends CleanupTrial only when the runner did not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tolokaforge.host import GoldenAgentFactory, UserRouter
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.conductor import TrialSettings, run_trial
from tolokaforge.host.runner import GrpcRunner
from tolokaforge.runner import start_runner

RETAIL = Path(__file__).parents[3] / "examples" / "packs" / "retail"
Stubs = Callable[..., Any]
"""The ``recording_stub`` fixture (conftest.py): RecordingStub(inner, *, health_delay_s, old)."""


async def _run_three(recording_stub: Stubs, old: bool) -> tuple[Any, list[str]]:
    pack = load_pack(RETAIL)
    runner = await start_runner(serve=False)
    stub = recording_stub(runner.servicer, old=old)
    client = GrpcRunner(stub, address="embedded")
    try:
        for loaded in pack.tasks[:3]:
            outcome = await run_trial(
                client, loaded, 0, GoldenAgentFactory(), UserRouter(), TrialSettings("r")
            )
            assert outcome.grade is not None and outcome.grade.binary_pass
        return stub, runner.servicer.runner.registry.trial_ids()
    finally:
        await client.aclose()
        await runner.close()


async def test_graded_trials_are_released_by_the_grade_without_a_cleanup_call(recording_stub: Stubs) -> None:
    stub, left = await _run_three(recording_stub, old=False)
    assert [answer.released for answer in stub.grades] == [True] * 3
    assert stub.cleanups == []
    assert left == []  # nothing is left registered


async def test_a_runner_that_does_not_release_is_sent_cleanup_as_before(recording_stub: Stubs) -> None:
    stub, left = await _run_three(recording_stub, old=True)
    assert not any(answer.released for answer in stub.grades)
    assert len(stub.cleanups) == 3
    assert left == []
