"""The ``browser`` tool on a real runner: real Chromium, a site answered by the trial's own worker.

The task's hidden site tool (written below, run in the trial's sandboxed worker) serves a tiny shop:
``/`` lists the ``items`` table with a form that POSTs to ``/add``, which appends a record and
redirects back. What the page does therefore changes the trial's tables, graded like any tool's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tolokaforge.contracts.runner import (
    ExecuteToolRequest,
    ExecutionStatus,
    GetStateRequest,
    RunnerServiceStub,
)
from tolokaforge.core.models import TrialSpec
from tolokaforge.core.runner_api import (
    GradeRequest,
    InfrastructureFailure,
    RegistrationFailedError,
    ToolCallRequest,
    ToolResult,
)
from tolokaforge.core.termination import TerminationReason
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner
from tolokaforge.runner.browser import BrowserUnavailableError

SITE = """
import base64
import html
import json
from urllib.parse import parse_qs, urlsplit


def _answer(status, body="", headers=None):
    headers = {"content-type": "text/html; charset=utf-8", **(headers or {})}
    return json.dumps(
        {"status": status, "headers": headers, "body_b64": base64.b64encode(body.encode()).decode()}
    )


def _home(items):
    rows = "".join(f"<li>{html.escape(item['name'])}</li>" for item in items)
    return (
        "<!doctype html><html><head><title>Shop</title></head><body><h1>Shop</h1>"
        f"<ul id='items'>{rows}</ul>"
        "<form method='post' action='/add'><input id='name' name='name'>"
        "<button id='add' type='submit'>Add</button></form>"
        "<a id='about' href='/about'>About us</a></body></html>"
    )


class ShopSite:
    @staticmethod
    def get_info():
        return {"type": "function", "function": {"name": "shop_site", "parameters": {"type": "object"}}}

    @staticmethod
    def invoke(data, method, url, headers, body_b64):
        path = urlsplit(url).path
        if path == "/" and method == "GET":
            return _answer(200, _home(data["items"]))
        if path == "/add" and method == "POST":
            form = parse_qs(base64.b64decode(body_b64).decode())
            data["items"].append({"name": form.get("name", [""])[0]})
            return _answer(303, headers={"location": "/"})
        if path == "/about":
            return _answer(200, "<html><head><title>About</title></head><body>We sell things.</body></html>")
        if path == "/boom":
            raise RuntimeError("the shop is on fire")
        return _answer(404, "<html><body>no such page</body></html>")
"""

SITE_TOOL = {
    "name": "shop_site",
    "parameters": {"type": "object"},
    "source": {"module_path": "shop", "class_name": "ShopSite"},
    "hidden": True,
    "validate_arguments": False,
}
BROWSER = {"sites": ["http://shop.test"], "initial_url": "http://shop.test/", "site_tool": "shop_site"}


def add(name: str) -> dict[str, Any]:
    """A browser call that types ``name`` into the form and submits it, addressing elements by selector."""
    return {
        "actions": [
            {"type": "type_text_at", "selector": "#name", "text": name, "press_enter": False},
            {"type": "click_at", "selector": "#add"},
        ]
    }


def shop_spec(trial_id: str, *, golden: list[dict[str, Any]] | None = None, **task: Any) -> TrialSpec:
    spec: dict[str, Any] = {
        "task_id": trial_id.split(":")[0],
        "agent_tools": [SITE_TOOL],
        "tool_code": {"files": {"shop.py": SITE}},
        "initial_state": {"tables": {"items": []}},
        "browser": BROWSER,
        "grading": {
            "combine_method": "weighted",
            "weights": {"state_checks": 1.0},
            "pass_threshold": 1.0,
            "state_checks": {
                "hash_enabled": True,
                "golden_actions": [{"tool_name": "browser", "arguments": a} for a in golden or []],
            },
        },
    }
    spec.update(task)
    return TrialSpec.model_validate({"trial_id": trial_id, "task": spec})


def call(
    trial_id: str, arguments: dict[str, Any], call_id: str, *, timeout_s: float = 0.0
) -> ToolCallRequest:
    return ToolCallRequest(trial_id, call_id, "browser", json.dumps(arguments), "agent", timeout_s=timeout_s)


def why(result: ToolResult) -> str:
    """What a result says (its failure's message, else its output), for assertion messages."""
    return f"{result.status.name}: {result.failure.message if result.failure else result.output}"


@pytest.fixture
async def runner() -> AsyncIterator[RunnerHandle]:
    """The default runner: tools in sandboxed workers, so the browser runs confined too."""
    handle = await start_runner(RunnerSettings())
    try:
        yield handle
    finally:
        await handle.close()


async def items(handle: RunnerHandle, trial_id: str) -> list[dict[str, Any]]:
    state = await handle.servicer.get_state(GetStateRequest(trial_id=trial_id))
    return json.loads(state.state_json)["items"]


async def test_a_browser_call_drives_the_site_and_its_form_changes_the_trials_table(
    runner: RunnerHandle,
) -> None:
    local = runner.runner
    registered = await local.register(shop_spec("shop:0"))
    offered = [tool.name for tool in registered.agent_tools]
    assert offered == ["browser"], offered  # the site tool is hidden
    parameters = json.loads(registered.agent_tools[0].parameters_json)
    assert "actions" in parameters["properties"]

    result = await local.execute(call("shop:0", add("lamp"), "c1"))
    assert result.status == ExecutionStatus.SUCCESS, why(result)
    assert "lamp" in result.output and result.state_mutations == 1
    (shot,) = result.attachments
    assert (shot.media_type, shot.label, shot.for_model) == ("image/jpeg", "screenshot", False)
    assert shot.data[:2] == b"\xff\xd8"
    assert await items(runner, "shop:0") == [{"name": "lamp"}]

    trial = local.registry.get("shop:0")
    visited = [url.rstrip("/") for url in trial.web.visited]
    assert visited[0] == "http://shop.test" and visited[-1] == "http://shop.test", visited
    assert trial.web.final is not None and "lamp" in trial.web.final.text

    # The same call over the wire: the screenshot travels as an attachment of ExecuteToolResponse.
    channel = runner.channel()
    try:
        response = await RunnerServiceStub(channel).execute_tool(
            ExecuteToolRequest(
                trial_id="shop:0",
                call_id="c2",
                tool_name="browser",
                arguments_json=json.dumps(add("desk")),
                executor="agent",
            )
        )
    finally:
        channel.close()
    assert response.status == ExecutionStatus.SUCCESS, response.error_message
    (wired,) = response.attachments
    assert wired.media_type == "image/jpeg" and wired.data[:2] == b"\xff\xd8" and not wired.for_model
    assert await items(runner, "shop:0") == [{"name": "lamp"}, {"name": "desk"}]

    health = await local.health()
    assert any(adapter.startswith("browser:") for adapter in health.adapters), health.adapters

    session = trial.browser.session
    assert session is not None
    await local.release("shop:0")
    assert trial.browser.session is None
    with pytest.raises(BrowserUnavailableError, match="closed"):
        await session.run([{"type": "screenshot"}], screenshot=False)


async def test_a_failed_action_is_the_tools_own_error_and_the_sites_changes_stand(
    runner: RunnerHandle,
) -> None:
    local = runner.runner
    await local.register(shop_spec("shop:0"))
    failing = {"actions": [*add("lamp")["actions"], {"type": "navigate", "url": "http://elsewhere.example/"}]}
    result = await local.execute(call("shop:0", failing, "c1"))
    assert result.status == ExecutionStatus.ERROR and result.reported_by_tool, why(result)
    assert result.failure is not None
    assert "elsewhere.example" in result.failure.message
    assert "lamp" in result.failure.message  # the observation follows the error
    assert await items(runner, "shop:0") == [{"name": "lamp"}]

    # A site tool that raises answers a 500 page saying why; the call itself goes on.
    broken = await local.execute(
        call("shop:0", {"actions": [{"type": "navigate", "url": "http://shop.test/boom"}]}, "c2")
    )
    assert broken.status == ExecutionStatus.SUCCESS, why(broken)
    assert "the shop is on fire" in broken.output

    # Past its budget: TIMEOUT, and what the site wrote during the call is undone.
    home = {"type": "navigate", "url": "http://shop.test/"}
    slow = {"actions": [home, *add("chair")["actions"], {"type": "wait_5_seconds"}]}
    store = local.registry.client
    before = (await store.get_hashes("shop:0")).version
    timed_out = await local.execute(call("shop:0", slow, "c3", timeout_s=4.0))
    assert timed_out.status == ExecutionStatus.TIMEOUT, why(timed_out)
    assert await items(runner, "shop:0") == [{"name": "lamp"}]
    # The chair was stored, then taken back by a batch of its own: two versions on.
    assert (await store.get_hashes("shop:0")).version == before + 2
    again = await local.execute(call("shop:0", {"actions": [{"type": "screenshot"}]}, "c4"))
    assert again.status == ExecutionStatus.SUCCESS and "lamp" in again.output, why(again)


async def test_golden_browser_calls_replay_on_a_fresh_page(runner: RunnerHandle) -> None:
    local = runner.runner
    golden = [add("lamp")]
    for trial_id in ("shop:same", "shop:other"):
        await local.register(shop_spec(trial_id, golden=golden))
    # It does what the golden path does, then leaves the page elsewhere: the replay, which
    # expects the form on the initial page, must not run on this page.
    await local.execute(call("shop:same", add("lamp"), "c1"))
    about = {"actions": [{"type": "click_at", "selector": "#about"}]}
    assert (await local.execute(call("shop:same", about, "c2"))).status == ExecutionStatus.SUCCESS
    trial = local.registry.get("shop:same")
    own_session, seen = trial.browser.session, list(trial.web.visited)

    grade = (await local.grade(GradeRequest("shop:same", None, TerminationReason.AGENT_DONE))).grade
    assert grade.components is not None and grade.components.state_checks == 1.0, grade.reasons
    assert trial.browser.session is own_session and trial.web.visited == seen
    assert trial.web.final is not None and "We sell things" in trial.web.final.text

    await local.execute(call("shop:other", add("desk"), "c1"))
    grade = (await local.grade(GradeRequest("shop:other", None, TerminationReason.AGENT_DONE))).grade
    assert grade.components is not None and grade.components.state_checks == 0.0
    diff = json.dumps(json.loads(grade.state_diff_json))
    assert "lamp" in diff and "desk" in diff, diff


async def test_initialization_actions_use_the_page_without_recording_it(runner: RunnerHandle) -> None:
    local = runner.runner
    init = {"initialization_actions": [{"tool_name": "browser", "arguments": add("seed")}]}
    await local.register(shop_spec("shop:0", initial_state={"tables": {"items": []}, **init}))
    trial = local.registry.get("shop:0")
    assert await items(runner, "shop:0") == [{"name": "seed"}]
    assert trial.web.visited == [] and trial.web.final is None
    result = await local.execute(call("shop:0", {"actions": [{"type": "screenshot"}]}, "c1"))
    assert "seed" in result.output  # the same page, still showing what the initialization did
    assert trial.web.final is not None

    # ResetTrial: the initial tables, a fresh page for the re-run initialization, nothing seen yet.
    first_page = trial.browser.session
    await local.registry.reset("shop:0", run_init_actions=True)
    assert await items(runner, "shop:0") == [{"name": "seed"}]
    assert trial.browser.session is not None and trial.browser.session is not first_page
    assert trial.web.visited == [] and trial.web.final is None


async def test_a_pack_tool_named_browser_is_refused_at_registration(runner: RunnerHandle) -> None:
    clash = {**SITE_TOOL, "name": "browser", "hidden": False}
    with pytest.raises(RegistrationFailedError, match="'browser'"):
        await runner.runner.register(shop_spec("shop:0", agent_tools=[SITE_TOOL, clash]))


async def test_trusted_mode_serves_the_site_from_a_thread() -> None:
    handle = await start_runner(RunnerSettings(isolation="thread"), serve=False)
    try:
        await handle.runner.register(shop_spec("shop:0"))
        result = await handle.runner.execute(call("shop:0", add("lamp"), "c1"))
        assert result.status == ExecutionStatus.SUCCESS, why(result)
        assert await items(handle, "shop:0") == [{"name": "lamp"}]

        # A task with no site tool: nothing answers its sites, so every request is refused.
        no_site = {key: value for key, value in BROWSER.items() if key != "site_tool"}
        await handle.runner.register(shop_spec("bare:0", browser=no_site))
        refused = await handle.runner.execute(call("bare:0", {"actions": [{"type": "screenshot"}]}, "c1"))
        assert refused.status == ExecutionStatus.ERROR and refused.reported_by_tool
        assert refused.failure is not None and "refused" in refused.failure.message
        assert handle.runner.registry.get("bare:0").web.refused == ["http://shop.test/"]
    finally:
        await handle.close()


async def test_a_browser_that_cannot_start_loses_the_trial_not_the_agent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOLOKAFORGE_CHROMIUM", "/nonexistent/chromium")
    handle = await start_runner(RunnerSettings(isolation="process"), serve=False)
    try:
        await handle.runner.register(shop_spec("shop:0"))
        with pytest.raises(InfrastructureFailure) as lost:
            await handle.runner.execute(call("shop:0", add("lamp"), "c1"))
        failure = lost.value.result.failure
        assert failure is not None and failure.retryable and "browser" in failure.message
    finally:
        await handle.close()
