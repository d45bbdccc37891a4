"""A pack written in the public Tolokaforge style validates, grades 1.0 on its golden path, and fails
a wrong path with the right reasons; every configured component is evaluated."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.agents.scripted import ScriptedAgentFactory, load_script
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

LIBRARY = Path(__file__).parent / "fixtures" / "packs" / "library"


def _grade(output: Path, task_id: str) -> dict[str, Any]:
    return yaml.safe_load((output / "trials" / task_id / "0" / "grade.yaml").read_text())


@pytest.fixture
def library(tmp_path: Path) -> Path:
    target = tmp_path / "library"
    shutil.copytree(LIBRARY, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


async def test_golden_path_grades_one_with_every_component_evaluated(library: Path, tmp_path: Path) -> None:
    pack = load_pack(library)
    out = tmp_path / "out"
    summary = await run_pack(pack, GoldenAgentFactory(), UserRouter(), RunSettings(output=out))
    grade = _grade(out, "lend_book")
    trajectory = yaml.safe_load((out / "trials" / "lend_book" / "0" / "trajectory.yaml").read_text())
    why = (grade["reasons"], trajectory.get("termination_reason"), trajectory.get("error"))
    assert (summary.pass_rate, summary.mean_score) == (1.0, 1.0), why
    assert grade["components"] == {
        "state_checks": 1.0,
        "transcript_rules": 1.0,
        "custom_checks": 1.0,
        "llm_judge": None,
        "trace_checks": None,
    }
    reasons: list[str] = grade["reasons"]
    assert "Custom checks: score=1.00 (3 passed, 0 failed, 0 skipped, 0 errored)" in reasons
    assert _grade(out, "return_book")["reasons"][0] == "State: hash match"


def test_a_module_shaped_mcp_server_file_loads_as_python_tools(library: Path) -> None:
    task = load_pack(library).task("return_book").task
    assert task.tool_servers == []
    assert [(t.name, t.source.module_path, t.source.class_name) for t in task.agent_tools] == [
        ("list_loans", "tasks.return_book.mcp_server", "list_loans"),
        ("return_book", "tasks.return_book.mcp_server", "return_book"),
    ]
    assert "tau_tools" not in sys.modules  # the plain-named helper package was not left behind


async def test_a_wrong_path_fails_with_the_reasons(library: Path, tmp_path: Path) -> None:
    pack = load_pack(library)
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            [
                {
                    "content": "",
                    "tool_calls": [{"name": "find_book", "arguments": {"isbn": "978-0441478125"}}],
                },
                {"content": "Sorry, I cannot lend it today.", "done": True},
            ]
        )
    )
    out = tmp_path / "out"
    settings = RunSettings(output=out, task_ids=("lend_book",))
    await run_pack(pack, ScriptedAgentFactory(load_script(script)), UserRouter(), settings)
    grade = _grade(out, "lend_book")
    assert grade["binary_pass"] is False
    reasons: list[str] = grade["reasons"]
    text = " | ".join(reasons)
    assert "loan_has_the_standard_period failed: M-7 has no loan" in text
    assert "told_the_member failed: the loan period was never stated" in text
    assert "one copy left on the shelf" in text


async def test_a_checks_file_that_cannot_import_fails_the_grade(library: Path, tmp_path: Path) -> None:
    pack = load_pack(library)
    # Validate imported it fine here; the runner receives a copy that cannot import (a runner whose
    # environment lacks what the file needs looks exactly like this to the grader).
    assert pack.tool_code is not None and pack.tool_code.files is not None
    pack.tool_code.files["tasks/lend_book/checks.py"] = "import loan_rules_v2\n"
    out = tmp_path / "out"
    settings = RunSettings(output=out, task_ids=("lend_book",))
    summary = await run_pack(pack, GoldenAgentFactory(), UserRouter(), settings)
    grade = _grade(out, "lend_book")
    assert summary.pass_rate == 0.0
    reasons: list[str] = grade["reasons"]
    assert grade["components"]["custom_checks"] == 0.0
    assert any("No module named 'loan_rules_v2'" in r for r in reasons)


def test_the_task_folders_tools_module_wins_over_the_pack_roots(library: Path) -> None:
    task = load_pack(library).task("lend_book").task
    assert [tool.source.module_path for tool in task.agent_tools] == ["tasks.lend_book.tools"] * 2
    assert "Never lend a book that has no available copy." in task.system_prompt
    assert task.user_simulator is not None and task.user_simulator.scripted_flow == [
        {"user": "Thanks, that's all."}
    ]


async def test_an_explicitly_forgiven_suite_is_unscored_and_says_so(library: Path, tmp_path: Path) -> None:
    grading = library / "tasks" / "lend_book" / "grading.yaml"
    data = yaml.safe_load(grading.read_text())
    data["custom_checks"].update(fail_on_error=False)
    grading.write_text(yaml.safe_dump(data))
    pack = load_pack(library)
    assert pack.tool_code is not None and pack.tool_code.files is not None
    pack.tool_code.files["tasks/lend_book/checks.py"] = "import loan_rules_v2\n"
    out = tmp_path / "out"
    settings = RunSettings(output=out, task_ids=("lend_book",))
    summary = await run_pack(pack, GoldenAgentFactory(), UserRouter(), settings)
    grade = _grade(out, "lend_book")
    reasons: list[str] = grade["reasons"]
    assert grade["components"]["custom_checks"] is None and grade["unscored"] == ["custom_checks"]
    assert any(
        r.startswith("Custom checks: unscored (fail_on_error: false), the suite failed to run")
        for r in reasons
    )
    written = yaml.safe_load((out / "summary.yaml").read_text())
    assert summary.unscored() == {"custom_checks": 1} == written["unscored_components"]
    assert written["per_trial"][0]["unscored"] == ["custom_checks"]


async def test_workspace_files_built_in_file_tools_and_file_checks(library: Path, tmp_path: Path) -> None:
    pack = load_pack(library)
    out = tmp_path / "golden"
    await run_pack(
        pack, GoldenAgentFactory(), UserRouter(), RunSettings(output=out, task_ids=("overdue_report",))
    )
    grade = _grade(out, "overdue_report")
    assert (grade["binary_pass"], grade["score"]) == (True, 1.0), grade
    assert "Files: all 3 checks passed" in grade["reasons"]
    assert grade["components"]["transcript_rules"] == 1.0  # read_file, write_file and calculator were called

    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            [
                {
                    "content": "",
                    "tool_calls": [{"name": "read_file", "arguments": {"path": "inbox/brief.txt"}}],
                },
                {
                    "content": "",
                    "tool_calls": [
                        {
                            "name": "write_file",
                            "arguments": {"path": "reports/overdue.md", "content": "L-4 is 3 days late"},
                        }
                    ],
                },
                {"content": "Done.", "done": True},
            ]
        )
    )
    out = tmp_path / "wrong"
    settings = RunSettings(output=out, task_ids=("overdue_report",))
    await run_pack(pack, ScriptedAgentFactory(load_script(script)), UserRouter(), settings)
    grade = _grade(out, "overdue_report")
    reasons: list[str] = grade["reasons"]
    assert grade["binary_pass"] is False and grade["components"]["state_checks"] == pytest.approx(1 / 3)
    assert any("the report names L-9: contains_ci 'l-9' holds in none of 1 file(s)" in r for r in reasons)
