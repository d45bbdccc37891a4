"""Web packs run end to end on the embedded runner's real browser: the public layout with a scripted
agent (right, and a planted mistake), and our own site's routes with golden replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.agents.scripted import ScriptedAgentFactory, load_script
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

FIXTURES = Path(__file__).parent / "fixtures" / "packs"


def _browse(*actions: dict[str, Any]) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": "browser", "arguments": {"actions": list(actions)}}]}


def _write(text: str) -> dict[str, Any]:
    return {
        "content": "",
        "tool_calls": [{"name": "write_file", "arguments": {"path": "answers/reply.md", "content": text}}],
    }


async def _scripted(tmp_path: Path, pack: str, task_id: str, turns: list[dict[str, Any]]) -> Path:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(turns, sort_keys=False))
    out = tmp_path / "out"
    settings = RunSettings(output=out, task_ids=(task_id,))
    await run_pack(
        load_pack(FIXTURES / pack), ScriptedAgentFactory(load_script(script)), UserRouter(), settings
    )
    return out / "trials" / task_id / "0"


def _read(trial: Path) -> tuple[dict[str, Any], list[str]]:
    grade = yaml.safe_load((trial / "grade.yaml").read_text())
    trajectory = yaml.safe_load((trial / "trajectory.yaml").read_text())
    return grade, [m["content"] for m in trajectory["messages"] if m["role"] == "tool"]


READ_THE_PORTAL = [
    _browse({"type": "click_at", "selector": "#order-5521"}),
    _browse({"type": "go_back"}, {"type": "click_at", "selector": "#returns-policy"}),
]


async def test_a_scripted_agent_reads_the_public_portal_and_passes(tmp_path: Path) -> None:
    turns = [
        *READ_THE_PORTAL,
        _write("Order #5521 was delivered on November 19, so it can be returned until December 19."),
        {"content": "Order #5521 can be returned until December 19.", "done": True},
    ]
    grade, seen = _read(await _scripted(tmp_path, "web_public", "browser_returns_01", turns))
    assert grade["binary_pass"] is True, grade["reasons"]
    assert "Delivered: November 19, 2026" in seen[0]
    assert "URL: http://mock-web:8080/task/browser/browser_returns_01/policy_returns.html" in seen[1]
    assert "within 30 days of delivery" in seen[1]


async def test_the_wrong_date_fails_naming_the_check(tmp_path: Path) -> None:
    turns = [
        *READ_THE_PORTAL,
        _write("Order #5521 can be returned until December 18."),
        {"content": "Done.", "done": True},
    ]
    grade, _ = _read(await _scripted(tmp_path, "web_public", "browser_returns_01", turns))
    assert grade["binary_pass"] is False
    assert any("last day of the 30-day window" in reason for reason in grade["reasons"]), grade["reasons"]


async def test_golden_replay_of_our_site_passes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = await run_pack(
        load_pack(FIXTURES / "web_routes"), GoldenAgentFactory(), UserRouter(), RunSettings(output=out)
    )
    grade, seen = _read(out / "trials" / "add_note" / "0")
    assert summary.pass_rate == 1.0, grade["reasons"]
    assert "URL: http://notes.test/notes" in seen[0] and "buy seeds" in seen[0]


async def test_a_route_that_raises_shows_a_500_and_keeps_nothing(tmp_path: Path) -> None:
    # The broken route appends a note, then raises: the page says why, and the note is not kept, so
    # adding the right note afterwards still matches the golden state exactly.
    turns = [
        _browse({"type": "click_at", "selector": "#break"}),
        _browse(
            {"type": "navigate", "url": "http://notes.test/"},
            {"type": "type_text_at", "selector": "#text", "text": "buy seeds"},
        ),
        {"content": "Added.", "done": True},
    ]
    grade, seen = _read(await _scripted(tmp_path, "web_routes", "add_note", turns))
    assert "the ledger is closed" in seen[0]
    assert "never kept" not in seen[1]
    assert grade["binary_pass"] is True, grade["reasons"]
    assert "State: hash match" in grade["reasons"]
