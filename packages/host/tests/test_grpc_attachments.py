"""A browser call's screenshot reaches the host through the gRPC adapter as it does through the embedded runner."""

from __future__ import annotations

import json

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.core.models import TrialSpec
from tolokaforge.core.runner_api import Runner, ToolCallRequest
from tolokaforge.host.runner import GrpcRunner
from tolokaforge.runner import RunnerSettings, start_runner

# A site of one page, answered by the task's hidden site tool in the trial's worker.
SITE = """
import base64
import json


class Page:
    @staticmethod
    def get_info():
        return {"type": "function", "function": {"name": "site", "parameters": {"type": "object"}}}

    @staticmethod
    def invoke(data, method, url, headers, body_b64):
        page = "<html><head><title>Hello</title></head><body><h1>Hello from the site</h1></body></html>"
        return json.dumps(
            {
                "status": 200,
                "headers": {"content-type": "text/html"},
                "body_b64": base64.b64encode(page.encode()).decode(),
            }
        )
"""


def _spec(trial_id: str, *, vision: bool) -> TrialSpec:
    task = {
        "task_id": "hello",
        "agent_tools": [
            {
                "name": "site",
                "source": {"module_path": "site", "class_name": "Page"},
                "hidden": True,
                "validate_arguments": False,
            }
        ],
        "tool_code": {"files": {"site.py": SITE}},
        "browser": {
            "sites": ["http://hello.test"],
            "initial_url": "http://hello.test/",
            "site_tool": "site",
            "vision": vision,
        },
        "grading": {"combine_method": "weighted", "pass_threshold": 1.0},
    }
    return TrialSpec.model_validate({"trial_id": trial_id, "task": task})


async def _screenshot(runner: Runner, trial_id: str, *, vision: bool) -> tuple[str, bytes, str, bool]:
    await runner.register(_spec(trial_id, vision=vision))
    actions = {"actions": [{"type": "screenshot"}]}
    result = await runner.execute(ToolCallRequest(trial_id, "c1", "browser", json.dumps(actions), "agent"))
    await runner.release(trial_id)
    assert result.status == ExecutionStatus.SUCCESS, result
    assert "Hello from the site" in result.output
    (shot,) = result.attachments
    return shot.media_type, shot.data[:2], shot.label, shot.for_model


async def test_attachments_arrive_the_same_through_both_adapters() -> None:
    handle = await start_runner(RunnerSettings())
    remote = GrpcRunner.connect(handle.host, handle.port, token=handle.token)
    try:
        direct = await _screenshot(handle.runner, "hello:0", vision=False)
        wired = await _screenshot(remote, "hello:1", vision=False)
        assert direct == wired == ("image/jpeg", b"\xff\xd8", "screenshot", False)
        # A vision task's screenshot is marked for the model too.
        assert (await _screenshot(remote, "hello:2", vision=True))[3] is True
    finally:
        await remote.aclose()
        await handle.close()
