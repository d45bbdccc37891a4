"""Workspaces are named by a digest of the trial id: ids that differ only in characters a directory
name cannot carry (``: # @ _``) never share one, and registering one never wipes another's files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tolokaforge.contracts.runner import CleanupTrialRequest, RegisterTrialRequest, RunnerServiceStub
from tolokaforge.runner import RunnerHandle

IDS = ["ws:0", "ws_0", "ws#0", "ws@0", "ws.0", "ws-0"]


async def test_trial_ids_differing_in_punctuation_get_their_own_workspaces(
    runner: RunnerHandle,
    stub: RunnerServiceStub,
    spec_factory: Callable[..., dict[str, Any]],
    request_for: Callable[..., RegisterTrialRequest],
) -> None:
    registry = runner.servicer.runner.registry
    places: list[Path] = []
    for trial_id in IDS:
        assert (await stub.register_trial(request_for(spec_factory(trial_id, task_id="ws")))).success
        workspace = registry.get(trial_id).files.workspace
        assert workspace is not None
        (workspace / "mine.txt").write_text(trial_id)
        places.append(workspace)
    assert len(set(places)) == len(IDS)
    assert [(place / "mine.txt").read_text() for place in places] == IDS  # none wiped by a later one
    for trial_id, place in zip(IDS, places, strict=True):
        assert (await stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))).success
        assert not place.exists()
