"""The host asks GradeTrial to release the trial, and sends CleanupTrial only when the runner did not."""

from __future__ import annotations

from pathlib import Path

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    CleanupTrialResponse,
    ExecuteToolRequest,
    ExecuteToolResponse,
    GradeTrialRequest,
    GradeTrialResponse,
    HealthCheckRequest,
    HealthCheckResponse,
    RegisterTrialRequest,
    RegisterTrialResponse,
)
from tolokaforge.host import GoldenAgentFactory, UserRouter
from tolokaforge.host.conductor import TrialSettings, run_trial
from tolokaforge.host.packs import load_pack
from tolokaforge.host.runner_client import RunnerClient
from tolokaforge.runner import start_runner
from tolokaforge.runner.in_process import InProcessStub

RETAIL = Path(__file__).parents[3] / "examples" / "packs" / "retail"


class _Counting:
    """The in-process stub, counting CleanupTrial calls; ``old``: a runner that knows no ``release``."""

    def __init__(self, inner: InProcessStub, *, old: bool) -> None:
        self.inner = inner
        self.old = old
        self.cleanups: list[str] = []
        self.grades: list[GradeTrialResponse] = []

    async def health_check(
        self, message: HealthCheckRequest | None = None, *, timeout: float | None = None
    ) -> HealthCheckResponse:
        return await self.inner.health_check(message, timeout=timeout)

    async def register_trial(
        self, message: RegisterTrialRequest, *, timeout: float | None = None
    ) -> RegisterTrialResponse:
        return await self.inner.register_trial(message, timeout=timeout)

    async def execute_tool(
        self, message: ExecuteToolRequest, *, timeout: float | None = None
    ) -> ExecuteToolResponse:
        return await self.inner.execute_tool(message, timeout=timeout)

    async def grade_trial(
        self, message: GradeTrialRequest, *, timeout: float | None = None
    ) -> GradeTrialResponse:
        if self.old:  # the field is unknown to it: dropped on decoding, never answered
            message.release = False
        answer = await self.inner.grade_trial(message, timeout=timeout)
        self.grades.append(answer)
        return answer

    async def cleanup_trial(
        self, message: CleanupTrialRequest, *, timeout: float | None = None
    ) -> CleanupTrialResponse:
        self.cleanups.append(message.trial_id)
        return await self.inner.cleanup_trial(message, timeout=timeout)


async def _run_three(old: bool) -> tuple[_Counting, list[str]]:
    pack = load_pack(RETAIL)
    runner = await start_runner(serve=False)
    stub = _Counting(runner.in_process_stub(), old=old)
    client = RunnerClient("embedded", 0, stub=stub)
    try:
        for loaded in pack.tasks[:3]:
            outcome = await run_trial(
                client, loaded, 0, GoldenAgentFactory(), UserRouter(), TrialSettings("r")
            )
            assert outcome.grade is not None and outcome.grade.binary_pass
        return stub, runner.servicer.registry.trial_ids()
    finally:
        client.close()
        await runner.close()


async def test_graded_trials_are_released_by_the_grade_without_a_cleanup_call() -> None:
    stub, left = await _run_three(old=False)
    assert [answer.released for answer in stub.grades] == [True] * 3
    assert stub.cleanups == []
    assert left == []  # nothing is left registered


async def test_a_runner_that_does_not_release_is_sent_cleanup_as_before() -> None:
    stub, left = await _run_three(old=True)
    assert not any(answer.released for answer in stub.grades)
    assert len(stub.cleanups) == 3
    assert left == []
