"""The http_mock proof pack: ``http_request`` to a task's ``initial_state.mock_web`` site, through the CLI.

Golden replay passes and reads the tracker page; a scripted agent that answers wrongly fails on the
rule it broke, and each way a request can go wrong gets its own error category; bad ``mock_web`` blocks
are refused by ``validate`` with the key's path.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

if TYPE_CHECKING:
    from conftest import Cli

PACK = Path(__file__).parent / "packs" / "http_mock"
TASK = Path("tasks/web/order_status")
SITE = "http://mock-web:8080"


def _trial(run: Path, task: str = "order_status") -> dict[str, Any]:
    return yaml.safe_load((run / "trials" / task / "0" / "trajectory.yaml").read_text())


def test_golden_replay_passes_reading_the_tracker_and_booking_the_hotel(tmp_path: Path, cli: Cli) -> None:
    run = tmp_path / "run"
    code, out = cli(["run", "--pack", str(PACK), "--agent", "golden", "--output", str(run)])
    assert code == 0, out
    assert out.strip().splitlines()[-1] == "exit 0: all 2 trials graded; pass rate 1.000 (2/2 passed)"
    [tool_message] = [m for m in _trial(run)["messages"] if m["role"] == "tool"]
    assert tool_message["content"].startswith("Status: 200\nResponse (JSON):\n{'order': '4410'")
    [confirmation] = [m for m in _trial(run, "book_hotel")["messages"] if m["role"] == "tool"]
    assert (
        "<h1>Booking confirmed</h1>" in confirmation["content"]
        and "seaside_resort" in confirmation["content"]
    )


def test_booking_the_wrong_hotel_fails_on_the_trials_table(tmp_path: Path, cli: Cli) -> None:
    form = {"name": "Ada Byron", "hotel": "mountain_lodge", "checkin": "2026-07-01", "checkout": "2026-07-04"}
    call = {
        "name": "http_request",
        "arguments": {"method": "POST", "url": f"{SITE}/booking/confirm", "data": form},
    }
    script = tmp_path / "wrong.yaml"
    script.write_text(yaml.safe_dump([{"tool_calls": [call]}, {"content": "Booked.", "done": True}]))
    run = tmp_path / "run"
    args = [
        "run",
        "--pack",
        str(PACK),
        "--task",
        "book_hotel",
        "--agent",
        "scripted",
        "--script",
        str(script),
    ]
    code, out = cli([*args, "--output", str(run)])
    assert code == 0, out
    [failure] = yaml.safe_load((run / "summary.yaml").read_text())["failures"]
    assert failure["kind"] == "failed" and "the seaside hotel is booked" in failure["reason"], failure


def _call(url: str, method: str = "GET") -> dict[str, Any]:
    return {"tool_calls": [{"name": "http_request", "arguments": {"method": method, "url": url}}]}


def test_a_wrong_answer_fails_and_each_failure_has_its_category(tmp_path: Path, cli: Cli) -> None:
    script = tmp_path / "wrong.yaml"
    turns = [
        _call(f"{SITE}/"),  # the site's index page
        _call("http://localhost:8080/task/web/order_status/www/orders/4410.json"),  # public alias and prefix
        _call("https://example.com/orders/4410.json"),  # not the declared site
        _call(f"{SITE}/orders/9999.json"),  # no such page
        _call(f"{SITE}/orders/4410.json", method="POST"),  # a static site changes nothing
        _call(f"{SITE}/grading.yaml"),  # the task's answers are not part of the site
        _call(f"{SITE}/orders/4410.json", method="PATCH"),  # not a method of the tool
        {"content": "Order 4410 was delivered yesterday.", "done": True},
    ]
    script.write_text(yaml.safe_dump(turns))
    run = tmp_path / "run"
    args = [
        "run",
        "--pack",
        str(PACK),
        "--task",
        "order_status",
        "--agent",
        "scripted",
        "--script",
        str(script),
    ]
    code, out = cli([*args, "--output", str(run)])
    assert code == 0, out
    [failure] = yaml.safe_load((run / "summary.yaml").read_text())["failures"]
    assert failure["kind"] == "failed" and "did not communicate 'customs'" in failure["reason"]
    calls = _trial(run)["tool_calls"]
    assert [(c["status"], c["error_category"]) for c in calls] == [
        ("SUCCESS", None),
        ("SUCCESS", None),
        ("ERROR", "PERMISSION_DENIED"),
        ("ERROR", "NOT_FOUND"),
        ("ERROR", "EXECUTION_FAILED"),
        ("ERROR", "NOT_FOUND"),
        ("INVALID_ARGUMENTS", "INVALID_ARGUMENTS"),
    ]
    assert "URL not allowed: https://example.com/orders/4410.json" in calls[2]["error"]
    assert "Status: 405" in calls[4]["error"]
    messages = [m for m in _trial(run)["messages"] if m["role"] == "tool"]
    assert messages[0]["content"].startswith("Status: 200\nResponse (HTML snippet):\n<html>")
    assert "held at customs" in messages[1]["content"]


@pytest.mark.parametrize(
    ("mock_web", "key", "says"),
    [
        (
            {"base_url": SITE, "routes": "mock_web/routes.yaml"},
            "initial_state.mock_web.routes",
            "not supported",
        ),
        ({"base_url": "mock-web:8080"}, "initial_state.mock_web.base_url", "must be an http(s) URL"),
        ({"base_url": f"{SITE}/api"}, "initial_state.mock_web.base_url", "no path"),
        (None, "tools.agent.enabled[0]", "http_request needs initial_state.mock_web.base_url"),
    ],
)
def test_validate_refuses_a_bad_mock_web_block_with_its_key(
    tmp_path: Path, cli: Cli, mock_web: dict[str, Any] | None, key: str, says: str
) -> None:
    root = tmp_path / "pack"
    shutil.copytree(PACK, root)
    task_file = root / TASK / "task.yaml"
    task = yaml.safe_load(task_file.read_text())
    if mock_web is None:
        del task["initial_state"]["mock_web"]
    else:
        task["initial_state"]["mock_web"] = mock_web
    task_file.write_text(yaml.safe_dump(task))
    code, out = cli(["validate", "--pack", str(root)])
    assert code != 0
    assert key in out and says in out, out
