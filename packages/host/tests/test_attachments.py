"""A tool call's attachments (a browser call's screenshots) on the host: the episode keeps them on the
call's tool message, the trial's files hold each once under ``attachments/`` (signed with the record),
and a vision model sees them beside the tool's text, as each provider takes images.

The runner here is a small Runner of the test's own whose one tool answers every call with a page's
text and a real JPEG (taken by headless Chromium), as the browser tool does."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from aiohttp import web

from tolokaforge.contracts.runner import ExecutionStatus, Grade, ToolSchema
from tolokaforge.core.llm.anthropic import messages_body
from tolokaforge.core.models import TaskDescription, TrialSpec
from tolokaforge.core.runner_api import (
    Attachment,
    GradeRequest,
    GradeResult,
    RegisteredTrial,
    RunnerHealth,
    ToolCallRequest,
    ToolResult,
)
from tolokaforge.host import llm_session
from tolokaforge.host.agents.llm import LLMAgent
from tolokaforge.host.agents.scripted import ScriptedAgent, ScriptedTurn
from tolokaforge.host.llm import ChatClient, ChatSettings
from tolokaforge.host.llm.openai_format import agent_view
from tolokaforge.host.results.ledger import Ledger
from tolokaforge.host.results.outcome import Episode, TrialOutcome
from tolokaforge.host.results.records import LEDGER_FILE, RecordSigner, check_record
from tolokaforge.host.results.result_writer import ResultWriter
from tolokaforge.host.results.trial_files import trial_dir
from tolokaforge.host.run.episode import run_episode
from tolokaforge.host.turns import AttachedToolMessage
from tolokaforge.host.users.scripted import ScriptedUser

if TYPE_CHECKING:
    from conftest import ChatServer, Jpegs, Replies, Responder

TASK = TaskDescription(task_id="web_shop_buy", system_prompt="Shop.", initial_user_message="Buy the mug.")


@pytest.fixture(scope="module")
def shots(jpegs: Jpegs) -> list[bytes]:
    return jpegs(3)


class ShopRunner:
    """A Runner whose one agent tool, ``browser``, answers call n with page n's text and screenshot."""

    def __init__(self, shots: list[bytes], *, for_model: bool = True) -> None:
        self.shots = shots
        self.for_model = for_model
        self.calls: list[ToolCallRequest] = []

    @property
    def address(self) -> str:
        return "in-test"

    async def health(self, *, budget_s: float | None = None) -> RunnerHealth:
        return RunnerHealth("healthy", "test", 0, True)

    async def register(self, spec: TrialSpec) -> RegisteredTrial:
        browser = ToolSchema(
            name="browser", description="Drive the page.", parameters_json='{"type": "object"}'
        )
        return RegisteredTrial(spec.trial_id, (browser,), ())

    async def execute(self, call: ToolCallRequest) -> ToolResult:
        number = len(self.calls)
        self.calls.append(call)
        page = f"Clicked at (500, 500)\nURL: http://shop.test/step/{number}\nPage: Step {number}"
        if not self.shots:  # a browser without screenshots
            return ToolResult(ExecutionStatus.SUCCESS, output=page)
        shot = Attachment("image/jpeg", self.shots[number % len(self.shots)], "screenshot", self.for_model)
        return ToolResult(ExecutionStatus.SUCCESS, output=page, attachments=(shot,))

    async def grade(self, request: GradeRequest) -> GradeResult:
        return GradeResult(Grade(binary_pass=True, score=1.0), released=True)

    async def release(self, trial_id: str) -> None:
        return None

    async def aclose(self) -> None:
        return None


def _clicks(count: int) -> list[ScriptedTurn]:
    turns = [
        ScriptedTurn.model_validate(
            {"tool_calls": [{"name": "browser", "arguments": {"actions": [{"type": "click_at"}]}}]}
        )
        for _ in range(count)
    ]
    return [*turns, ScriptedTurn(content="Bought.", done=True)]


async def _episode(runner: ShopRunner, calls: int) -> Episode:
    registered = await runner.register(TrialSpec(trial_id="web_shop_buy:0", task=TASK))
    agent = ScriptedAgent(_clicks(calls))
    return await run_episode(runner, registered, TASK, agent, ScriptedUser([]), max_turns=10)


async def _write(output: Path, episode: Episode, ledger: Ledger, *, helper: bool) -> None:
    outcome = TrialOutcome(
        TASK.task_id, 0, "web_shop_buy:0", episode, grade=Grade(binary_pass=True, score=1.0)
    )
    writer = ResultWriter(helper=helper, ledger=ledger)
    try:
        writer.write(output, outcome)
        await writer.drain()
    finally:
        writer.close()


def _ledger(output: Path) -> Ledger:
    signer = RecordSigner("0" * 32, os.urandom(32))
    ledger = Ledger(signer, output / LEDGER_FILE, output.parent / f"{output.name}.head")
    ledger.create()
    return ledger


async def test_the_episode_keeps_each_call_s_screenshot_on_its_tool_message(shots: list[bytes]) -> None:
    episode = await _episode(ShopRunner(shots), 2)
    tool_messages = [message for message in episode.messages if message.role == "tool"]
    assert [type(message) for message in tool_messages] == [AttachedToolMessage, AttachedToolMessage]
    assert [m.attachments[0].data for m in tool_messages if isinstance(m, AttachedToolMessage)] == shots[:2]
    assert tool_messages[1].content.startswith("Clicked at (500, 500)\nURL: http://shop.test/step/1")


@pytest.mark.parametrize("helper", [False, True], ids=["thread", "helper-process"])
async def test_each_screenshot_is_a_signed_file_of_the_record_referenced_by_path(
    shots: list[bytes], tmp_path: Path, helper: bool
) -> None:
    output = tmp_path / "run"
    output.mkdir()
    ledger = _ledger(output)
    await _write(output, await _episode(ShopRunner(shots), 3), ledger, helper=helper)
    directory = trial_dir(output, TASK.task_id, 0)
    names = sorted(os.listdir(directory / "attachments"))
    assert names == ["0000-screenshot.jpg", "0001-screenshot.jpg", "0002-screenshot.jpg"]
    assert [(directory / "attachments" / name).read_bytes() for name in names] == shots
    text = (directory / "trajectory.yaml").read_text()
    assert base64.b64encode(shots[0]).decode()[:40] not in text  # never inline
    trajectory = yaml.safe_load(text)
    tools = [message for message in trajectory["messages"] if message["role"] == "tool"]
    assert tools[2]["attachments"] == [
        {
            "path": "attachments/0002-screenshot.jpg",
            "media_type": "image/jpeg",
            "label": "screenshot",
            "for_model": True,
        }
    ]
    signature = yaml.safe_load((directory / "signature.yaml").read_text())
    assert signature["files"]["attachments/0001-screenshot.jpg"] == hashlib.sha256(shots[1]).hexdigest()
    accepted = ledger.read().accepted(TASK.task_id, 0)
    check = check_record(directory, ledger.signer, TASK.task_id, 0, accepted)
    assert check.intact, check.problem
    assert check.contents["attachments/0000-screenshot.jpg"] == shots[0]


async def test_a_changed_missing_or_added_attachment_fails_the_record_check(
    shots: list[bytes], tmp_path: Path
) -> None:
    output = tmp_path / "run"
    output.mkdir()
    ledger = _ledger(output)
    await _write(output, await _episode(ShopRunner(shots), 2), ledger, helper=False)
    directory = trial_dir(output, TASK.task_id, 0)
    folder = directory / "attachments"
    accepted = ledger.read().accepted(TASK.task_id, 0)

    def problem() -> str | None:
        return check_record(directory, ledger.signer, TASK.task_id, 0, accepted).problem

    (folder / "0002-screenshot.jpg").write_bytes(shots[2])
    assert (
        problem() == "attachments/0002-screenshot.jpg is not part of the signed record (a file added to it)"
    )
    (folder / "0002-screenshot.jpg").unlink()
    original = (folder / "0001-screenshot.jpg").read_bytes()
    (folder / "0001-screenshot.jpg").write_bytes(shots[2])
    assert problem() == "attachments/0001-screenshot.jpg was changed after it was signed"
    (folder / "0001-screenshot.jpg").unlink()
    assert problem() == (
        "attachments/0001-screenshot.jpg is missing: a file of the record the ledger accepted (attempt 1) was deleted"
    )
    (folder / "0001-screenshot.jpg").write_bytes(original)
    assert problem() is None


async def test_a_trial_written_again_keeps_none_of_the_earlier_attempt_s_attachments(
    shots: list[bytes], tmp_path: Path
) -> None:
    output = tmp_path / "run"
    output.mkdir()
    ledger = _ledger(output)
    await _write(output, await _episode(ShopRunner(shots), 3), ledger, helper=False)
    await _write(output, await _episode(ShopRunner(shots), 1), ledger, helper=False)  # attempt 2: one call
    directory = trial_dir(output, TASK.task_id, 0)
    assert os.listdir(directory / "attachments") == ["0000-screenshot.jpg"]
    check = check_record(directory, ledger.signer, TASK.task_id, 0, ledger.read().accepted(TASK.task_id, 0))
    assert check.intact, check.problem
    await _write(output, await _episode(ShopRunner([]), 1), ledger, helper=False)  # attempt 3: no screenshots
    assert not (directory / "attachments").exists()
    check = check_record(directory, ledger.signer, TASK.task_id, 0, ledger.read().accepted(TASK.task_id, 0))
    assert check.intact, check.problem


async def test_a_vision_model_sees_each_screenshot_in_a_user_message_after_the_tool_results(
    shots: list[bytes],
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        if count == 1:
            return replies.completion(
                replies.tool_call("call_1", "browser", '{"actions": [{"type": "click_at"}]}')
            )
        return replies.completion({"content": "Bought."})

    server = await chat_server(respond)
    runner = ShopRunner(shots)
    registered = await runner.register(TrialSpec(trial_id="web_shop_buy:0", task=TASK))
    async with llm_session(4) as session:
        client = ChatClient(
            ChatSettings(model="gpt-vision", base_url=server.url, api_key="test-key"), session, {}
        )
        agent = LLMAgent(client)
        await run_episode(runner, registered, TASK, agent, ScriptedUser([{"user": "Thanks."}]), max_turns=2)
    second = server.requests[1]["messages"]
    roles = [message["role"] for message in second]
    assert roles[:5] == ["system", "user", "assistant", "tool", "user"]
    tool, shown = second[3], second[4]
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": tool["content"]}
    assert "URL: http://shop.test/step/0" in tool["content"]
    assert shown["content"] == [
        {"type": "text", "text": "Image(s) from tool call call_1:"},
        {
            "type": "image_url",
            "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(shots[0]).decode()},
        },
    ]


async def test_screenshots_not_meant_for_the_model_are_not_sent(shots: list[bytes]) -> None:
    episode = await _episode(ShopRunner(shots, for_model=False), 1)
    view = agent_view(episode.messages)
    assert all("images" not in message for message in view)
    assert [message["role"] for message in view] == ["system", "user", "assistant", "tool", "assistant"]


async def test_anthropic_gets_the_screenshot_inside_the_tool_result(shots: list[bytes]) -> None:
    episode = await _episode(ShopRunner(shots), 2)
    body = messages_body("claude-x", agent_view(episode.messages), [], {})
    results = [
        block for turn in body["messages"] for block in turn["content"] if block.get("type") == "tool_result"
    ]
    assert len(results) == 2
    text, image = results[1]["content"]
    assert text["type"] == "text" and "URL: http://shop.test/step/1" in text["text"]
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": base64.b64encode(shots[1]).decode()},
    }
    assert all(turn["role"] in ("user", "assistant") for turn in body["messages"])  # no extra user turn
