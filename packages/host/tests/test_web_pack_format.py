"""Web tasks in a pack: ``browser`` enabled, ``tools.agent.browser``, and ``initial_state.mock_web`` with
the site's own static files and routes, in the public layout and in ours.

The site tool is exercised as the runner runs it: the loaded task's code bundle is written out by the
runner's code loader and the shipped module imported from it, so what travels (services.json, the
routes module, a binary file as base64) is what answers.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tolokaforge.core.models import TaskDescription
from tolokaforge.host.errors import PackLoadError
from tolokaforge.host.packs import load_pack
from tolokaforge.runner.tools.code_loader import load_code

FIXTURES = Path(__file__).parent / "fixtures" / "packs"
PUBLIC = FIXTURES / "web_public"
OURS = FIXTURES / "web_routes"
PORTAL = "http://mock-web:8080/task/browser/browser_returns_01"

Ask = Callable[..., dict[str, Any]]


def _task(root: Path, task_id: str) -> TaskDescription:
    [task] = [loaded.task for loaded in load_pack(root).tasks if loaded.task_id == task_id]
    return task


def _site_tool(task: TaskDescription, work: Path) -> Any:
    """The hidden site tool's class, imported from the task's code bundle as the runner imports it."""
    assert task.browser is not None and task.tool_code is not None
    [tool] = [tool for tool in task.agent_tools if tool.name == task.browser.site_tool]
    bundle = load_code(task.tool_code, work)
    return bundle.import_module(tool.source.module_path).TOOLS[tool.source.class_name]


def _asker(tool: Any, tables: dict[str, Any]) -> Ask:
    def ask(method: str, url: str, body: bytes = b"", **headers: str) -> dict[str, Any]:
        arguments: dict[str, Any] = {"method": method, "url": url}
        if headers:
            arguments["headers"] = {k.replace("_", "-"): v for k, v in headers.items()}
        if body:
            arguments["body_b64"] = base64.b64encode(body).decode()
        answer = json.loads(tool.invoke(tables, **arguments))
        answer["body"] = base64.b64decode(answer.pop("body_b64"))
        return answer

    return ask


def test_the_public_browser_task_loads_with_its_site_and_hidden_tool() -> None:
    task = _task(PUBLIC, "browser_returns_01")
    assert task.browser is not None
    assert task.browser.initial_url == f"{PORTAL}/index.html"
    assert task.browser.allowed_actions == [
        "navigate",
        "click_at",
        "scroll_document",
        "go_back",
        "key_combination",
    ]
    assert task.browser.sites == ["http://mock-web:8080", "http://mock-web", "http://localhost:8080"]
    # The runner serves `browser` itself; the only agent tool of ours is the hidden site tool.
    [site_tool] = task.agent_tools
    assert site_tool.name == task.browser.site_tool and site_tool.hidden
    assert [server.enabled for server in task.tool_servers] == [["read_file", "write_file"]]


def test_a_browser_task_without_a_site_reaches_nothing() -> None:
    task = _task(PUBLIC, "page_secret")
    assert task.browser is not None
    assert (task.browser.sites, task.browser.site_tool, task.browser.initial_url) == ([], None, None)
    assert task.agent_tools == []
    assert "page.html" in task.initial_state.workspace_files


def test_the_public_site_serves_the_task_pages_and_never_its_answers(tmp_path: Path) -> None:
    ask = _asker(_site_tool(_task(PUBLIC, "browser_returns_01"), tmp_path), {})
    page = ask("GET", f"{PORTAL}/index.html")
    assert page["status"] == 200 and page["headers"]["content-type"] == "text/html; charset=utf-8"
    assert b"<h1>Support portal</h1>" in page["body"]
    # The public service's other names reach the same site.
    assert (
        b"Delivered: November 19"
        in ask("GET", "http://localhost:8080/task/browser/browser_returns_01/order_5521.html")["body"]
    )
    for hidden in ("task.yaml", "grading.yaml"):
        refused = ask("GET", f"{PORTAL}/{hidden}")
        assert refused["status"] == 404 and b"404 Not Found" in refused["body"]
        assert b"combine" not in refused["body"]
    posted = ask("POST", f"{PORTAL}/index.html", b"x=1", content_type="application/x-www-form-urlencoded")
    assert posted["status"] == 405 and posted["headers"]["allow"] == "GET, HEAD"
    with pytest.raises(PermissionError, match="Only the task's mock site is reachable"):
        ask("GET", "http://example.com/")


@pytest.fixture
def notes(tmp_path: Path) -> tuple[Ask, dict[str, Any]]:
    tables: dict[str, Any] = json.loads((OURS / "data" / "notes.json").read_text())
    return _asker(_site_tool(_task(OURS, "add_note"), tmp_path), tables), tables


def test_our_site_settings_come_from_the_browser_block() -> None:
    browser = _task(OURS, "add_note").browser
    assert browser is not None
    assert (browser.viewport_width, browser.viewport_height, browser.screenshots) == (1024, 768, False)
    assert browser.sites[0] == "http://notes.test" and browser.initial_url == "http://notes.test/"


def test_routes_read_and_change_the_trials_tables(notes: tuple[Ask, dict[str, Any]]) -> None:
    ask, tables = notes
    listed = ask("GET", "http://notes.test/notes")
    assert listed["status"] == 200 and b"<li id='note-1'>water the ferns</li>" in listed["body"]
    added = ask(
        "POST", "http://notes.test/notes", b"text=buy+seeds", content_type="application/x-www-form-urlencoded"
    )
    assert (added["status"], added["headers"]["location"]) == (303, "/notes")
    as_json = ask("POST", "http://notes.test/notes/", b'{"text": "rake"}', content_type="application/json")
    assert as_json["status"] == 303
    boundary = "xyz"
    multipart = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="text"\r\n\r\nsow peas\r\n--{boundary}--\r\n'
    ).encode()
    ask(
        "POST", "http://notes.test/notes", multipart, content_type=f"multipart/form-data; boundary={boundary}"
    )
    assert [note["text"] for note in tables["notes"]] == ["water the ferns", "buy seeds", "rake", "sow peas"]
    shown = ask("GET", "http://notes.test/notes/2?from=list")
    assert shown["headers"]["content-type"] == "application/json"
    assert json.loads(shown["body"]) == {"note": {"id": 2, "text": "buy seeds"}, "query": {"from": "list"}}


def test_a_route_that_raises_fails_the_call_naming_the_route(notes: tuple[Ask, dict[str, Any]]) -> None:
    ask, _ = notes
    # The call fails (so the worker drops the request's changes) and the runner shows a 500 page.
    with pytest.raises(Exception, match=r"POST /broken raised RuntimeError: the ledger is closed") as caught:
        ask("POST", "http://notes.test/broken")
    assert type(caught.value).__name__ == "RouteFailed"


def test_our_site_serves_its_root_folder(notes: tuple[Ask, dict[str, Any]]) -> None:
    ask, _ = notes
    home = ask("GET", "http://notes.test/")
    assert home["status"] == 200 and b"<title>Notes home</title>" in home["body"]
    assert ask("GET", "http://notes.test/style.css")["headers"]["content-type"] == "text/css; charset=utf-8"
    logo = ask("GET", "http://notes.test/logo.png")  # a binary file: it travels base64 in the bundle
    assert logo["headers"]["content-type"] == "image/png"
    assert logo["body"] == (OURS / "site" / "logo.png").read_bytes()
    folder = ask("GET", "http://notes.test/help?tab=1")
    assert (folder["status"], folder["headers"]["location"]) == (301, "/help/?tab=1")
    assert b"<title>Help</title>" in ask("GET", "http://notes.test/help/")["body"]
    for never in ("secret.py", "task.yaml", "missing.html", "../pack.yaml"):
        assert ask("GET", f"http://notes.test/{never}")["status"] == 404, never
    # Ours has no public booking form; a route's other method is a 405 naming the ones it takes.
    assert ask("GET", "http://notes.test/booking")["status"] == 404
    wrong = ask("DELETE", "http://notes.test/notes")
    assert (wrong["status"], wrong["headers"]["allow"]) == (405, "GET, POST")
    assert ask("POST", "http://notes.test/style.css")["status"] == 405
    assert json.loads(ask("GET", "http://notes.test/health")["body"]) == {"status": "healthy"}


def _broken(root: Path, change: Callable[[dict[str, Any]], None], task: str = "tasks/add_note") -> list[str]:
    task_file = root / task / "task.yaml"
    spec = yaml.safe_load(task_file.read_text())
    change(spec)
    task_file.write_text(yaml.safe_dump(spec))
    with pytest.raises(PackLoadError) as caught:
        load_pack(root)
    return [f"{problem.key}: {problem.message}" for problem in caught.value.problems]


def _setting(where: str, value: object) -> Callable[[dict[str, Any]], None]:
    """A change of task.yaml: set the dotted key ``where`` to ``value``."""

    def change(spec: dict[str, Any]) -> None:
        *parents, last = where.split(".")
        for key in parents:
            spec = spec[key]
        spec[last] = value

    return change


BROWSER = "tools.agent.browser"
MOCK_WEB = "initial_state.mock_web"


@pytest.mark.parametrize(
    ("where", "value", "says"),
    [
        ("tools.agent.enabled", ["read_file"], "tools.agent.browser: is set, but 'browser'"),
        (f"{BROWSER}.headless", True, "tools.agent.browser.headless: is not supported"),
        (
            f"{BROWSER}.initial_url",
            "http://elsewhere.test/",
            "tools.agent.browser.initial_url: 'http://elsewhere.test/' is outside the task's sites",
        ),
        (
            f"{BROWSER}.allowed_actions",
            ["navigate", "teleport"],
            "tools.agent.browser.allowed_actions[1]: 'teleport' is not a browser action",
        ),
        (f"{BROWSER}.viewport", {"width": 50}, "tools.agent.browser.viewport.width: must be"),
        (f"{BROWSER}.vision", "yes", "tools.agent.browser.vision: must be true or false"),
        ("tools.agent.enabled", ["browser", "mobile"], "tools.agent.enabled[1]: 'mobile' is not supported"),
        ("tools.agent.mobile", {"apps": {}}, "tools.agent.mobile: is not supported"),
        (
            f"{MOCK_WEB}.root",
            "nowhere",
            "initial_state.mock_web.root: 'nowhere' is not a folder inside the pack",
        ),
        (
            f"{MOCK_WEB}.routes",
            "shop.absent",
            "initial_state.mock_web.routes: module 'shop.absent' not found",
        ),
        (
            f"{MOCK_WEB}.routes",
            "mock_web/routes.yaml",
            "initial_state.mock_web.routes: 'mock_web/routes.yaml' is not supported",
        ),
        (f"{MOCK_WEB}.cookies", True, "initial_state.mock_web.cookies: is not supported"),
    ],
)
def test_validate_names_the_key_of_a_bad_web_setting(
    tmp_path: Path, where: str, value: object, says: str
) -> None:
    root = tmp_path / "pack"
    shutil.copytree(OURS, root)
    problems = _broken(root, _setting(where, value))
    assert any(problem.startswith(says) for problem in problems), problems


def test_validate_reads_the_routes_keys(tmp_path: Path) -> None:
    root = tmp_path / "pack"
    shutil.copytree(OURS, root)
    routes = root / "shop" / "routes.py"
    routes.write_text(routes.read_text().replace('"GET /notes": list_notes', '"get /notes": list_notes'))
    problems = _broken(root, lambda s: None)
    assert any(
        "initial_state.mock_web.routes: ROUTES of 'shop.routes': 'get /notes' is not 'METHOD /path'" in p
        for p in problems
    ), problems


def test_a_routes_file_path_resolves_like_a_module(tmp_path: Path) -> None:
    root = tmp_path / "pack"
    shutil.copytree(OURS, root)
    task_file = root / "tasks" / "add_note" / "task.yaml"
    spec = yaml.safe_load(task_file.read_text())
    spec["initial_state"]["mock_web"]["routes"] = "shop/routes.py"
    task_file.write_text(yaml.safe_dump(spec))
    assert _task(root, "add_note").browser is not None


def test_golden_browser_actions_are_checked_against_the_browser_schema(tmp_path: Path) -> None:
    root = tmp_path / "pack"
    shutil.copytree(OURS, root)
    grading_file = root / "tasks" / "add_note" / "grading.yaml"
    grading = yaml.safe_load(grading_file.read_text())
    grading["state_checks"]["hash"]["golden_actions"][0]["kwargs"]["actions"][0]["type"] = "teleport"
    grading_file.write_text(yaml.safe_dump(grading))
    with pytest.raises(PackLoadError) as caught:
        load_pack(root)
    [problem] = caught.value.problems
    assert problem.key.startswith("state_checks.hash.golden_actions[0].kwargs.actions")
    assert "the schema of 'browser' refuses these arguments" in problem.message


def test_without_a_site_the_initial_url_must_be_a_local_page(tmp_path: Path) -> None:
    root = tmp_path / "pack"
    shutil.copytree(PUBLIC, root)
    browser = {"initial_url": "http://mock-web:8080/page.html"}
    problems = _broken(root, _setting("tools.agent.browser", browser), task="tasks/test/page_secret")
    assert problems == [
        "tools.agent.browser.initial_url: 'http://mock-web:8080/page.html' is outside the task's sites: the task "
        "declares no site (initial_state.mock_web.base_url), so the browser reaches only about: and data: pages"
    ]
    (root / "tasks/test/page_secret/task.yaml").write_text(
        (root / "tasks/test/page_secret/task.yaml")
        .read_text()
        .replace("initial_url: http://mock-web:8080/page.html", "initial_url: 'data:text/html,<p>hi</p>'")
    )
    assert _task(root, "page_secret").browser is not None
