"""The gRPC client adapter answers as the embedded runner does: the same typed objects and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tolokaforge.contracts.runner import GradeReasonVerdict, RegistrationErrorKind
from tolokaforge.core.models import TaskDescription
from tolokaforge.core.runner_api import (
    GradeRequest,
    RegistrationFailedError,
    Runner,
    ToolCallRequest,
    TrialLostError,
)
from tolokaforge.core.termination import TerminationReason
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.trial_spec import build_trial_spec
from tolokaforge.host.runner import GrpcRunner
from tolokaforge.runner import start_runner


async def _idle_trial_grade(runner: Runner, task: TaskDescription, index: int) -> list[tuple[str, int, str]]:
    spec = build_trial_spec(task, run_id="r", trial_index=index)
    registered = await runner.register(spec)
    assert registered.agent_tools
    result = await runner.grade(GradeRequest(spec.trial_id, None, TerminationReason.AGENT_DONE, release=True))
    assert result.released and not result.grade.binary_pass
    assert result.grade.reasons == " | ".join(reason.message for reason in result.grade.reason_items)
    return [(reason.kind, reason.verdict, reason.message) for reason in result.grade.reason_items]


async def test_both_adapters_give_the_same_typed_reasons_and_errors(packs_dir: Path) -> None:
    # Its golden path cancels an order and creates a return: a trial that does nothing fails its checks.
    task = load_pack(packs_dir / "retail").task("multi_cancel_and_return").task
    handle = await start_runner()
    remote = GrpcRunner.connect(handle.host, handle.port, token=handle.token)
    try:
        # A trial that did nothing fails its hash check: the reasons travel typed over the wire.
        over_wire = await _idle_trial_grade(remote, task, 0)
        direct = await _idle_trial_grade(handle.runner, task, 1)
        assert over_wire == direct
        assert any(kind == "hash" and verdict == GradeReasonVerdict.FAILED for kind, verdict, _ in direct)
        for runner in (remote, handle.runner):
            with pytest.raises(TrialLostError):
                await runner.execute(ToolCallRequest("gone:0", "c1", "find_user_id_by_email", "{}", "agent"))
            first = task.agent_tools[0]
            assert first.source is not None
            wrong = first.model_copy(
                update={"source": first.source.model_copy(update={"class_name": "Nope"})}
            )
            broken = task.model_copy(update={"task_id": "broken", "agent_tools": [wrong]})
            spec = build_trial_spec(broken, run_id="r", trial_index=len(runner.address))
            with pytest.raises(RegistrationFailedError) as refused:
                await runner.register(spec)
            assert refused.value.kind == RegistrationErrorKind.TOOL_LOAD, refused.value
    finally:
        await remote.aclose()
        await handle.close()
