"""A pack whose tools come from an MCP server (tools.agent.mcp_server), end to end on the embedded runner."""

from __future__ import annotations

from pathlib import Path

import yaml

from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.agents.scripted import ScriptedAgentFactory, load_script
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter


def _grade(output: Path, task_id: str) -> dict[str, object]:
    return yaml.safe_load((output / "trials" / task_id / "0" / "grade.yaml").read_text())


async def test_loader_turns_mcp_server_into_a_tool_server(packs_dir: Path) -> None:
    pack = load_pack(packs_dir / "mcp_notes")
    for loaded in pack.tasks:
        (server,) = loaded.task.tool_servers
        assert (server.protocol, server.script, server.actor) == ("mcp", "mcp_server.py", "agent")
        assert loaded.task.tool_code is not None and "mcp_server.py" in (loaded.task.tool_code.files or {})


async def test_golden_agent_passes_every_mcp_task(packs_dir: Path, tmp_path: Path) -> None:
    pack = load_pack(packs_dir / "mcp_notes")
    summary = await run_pack(
        pack, GoldenAgentFactory(), UserRouter(), RunSettings(output=tmp_path, concurrency=2)
    )
    assert summary.pass_rate == 1.0 and summary.mean_score == 1.0
    assert _grade(tmp_path, "mcp_add_reminder_note")["reasons"] == [
        "State: hash match",
        "JSONPath: all 2 checks passed",
        "Transcript: all 1 rules passed",
    ]


async def test_a_forbidden_delete_through_the_server_fails_with_a_diff(
    packs_dir: Path, tmp_path: Path
) -> None:
    pack = load_pack(packs_dir / "mcp_notes")
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            [
                {"content": "", "tool_calls": [{"name": "get_note", "arguments": {"note_id": "N-2"}}]},
                {"content": "", "tool_calls": [{"name": "delete_note", "arguments": {"note_id": "N-2"}}]},
                {"content": "N-2 said: book the train to Lyon. It is gone now.", "done": True},
            ]
        )
    )
    output = tmp_path / "out"
    await run_pack(
        pack,
        ScriptedAgentFactory(load_script(script)),
        UserRouter(),
        RunSettings(output=output, task_ids=("mcp_read_note_refuse_delete",)),
    )
    grade = _grade(output, "mcp_read_note_refuse_delete")
    assert grade["binary_pass"] is False and grade["score"] == 0.0
    assert "State: 1 removed (notes[N-2])" in grade["reasons"]  # pyright: ignore[reportOperatorIssue]
