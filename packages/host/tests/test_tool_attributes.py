"""A python tool class's ``hidden`` and ``validate_arguments`` attributes reach its ToolDescription, and a
golden action may name a hidden tool (docs/pack-format.md, docs/protocol/runner.md#hidden-tools-and-unchecked-arguments)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tolokaforge.host.packs import load_pack

LIBRARY = Path(__file__).parent / "fixtures" / "packs" / "library"

EXTRA_TOOLS = """

class Restock:
    hidden = True

    @staticmethod
    def get_info() -> dict[str, Any]:
        return _schema("restock", "Put a copy back on the shelf.", {"isbn": {"type": "string"}})

    @staticmethod
    def invoke(data: dict[str, Any], isbn: str) -> str:
        return "restocked"


class LendAny(LendBook):
    validate_arguments = False

    @staticmethod
    def get_info() -> dict[str, Any]:
        return _schema("lend_any", "Lend, arguments unchecked.", {"isbn": {"type": "string"}})


class Odd:
    hidden = "yes"  # not a bool: ignored
    validate_arguments = 0  # not False: ignored

    @staticmethod
    def get_info() -> dict[str, Any]:
        return _schema("odd", "Odd attributes.", {})

    @staticmethod
    def invoke(data: dict[str, Any]) -> str:
        return "odd"


TOOLS.update(restock=Restock, lend_any=LendAny, odd=Odd)
"""


def test_hidden_and_unchecked_tools_load_and_golden_actions_may_name_hidden_ones(tmp_path: Path) -> None:
    root = tmp_path / "library"
    shutil.copytree(LIBRARY, root, ignore=shutil.ignore_patterns("__pycache__"))
    task_dir = root / "tasks" / "lend_book"
    with (task_dir / "tools.py").open("a", encoding="utf-8") as tools:
        tools.write(EXTRA_TOOLS)
    task = yaml.safe_load((task_dir / "task.yaml").read_text())
    task["tools"]["agent"]["enabled"] += ["restock", "lend_any", "odd"]
    (task_dir / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    grading = yaml.safe_load((task_dir / "grading.yaml").read_text())
    grading["state_checks"]["hash"]["golden_actions"].append(
        {"name": "restock", "kwargs": {"isbn": "978-0441478125"}}
    )
    (task_dir / "grading.yaml").write_text(yaml.safe_dump(grading, sort_keys=False))

    loaded = load_pack(root).task("lend_book").task
    tools = {tool.name: tool for tool in loaded.agent_tools}
    assert [(name, t.hidden, t.validate_arguments) for name, t in tools.items()] == [
        ("find_book", False, True),
        ("lend_book", False, True),
        ("restock", True, True),
        ("lend_any", False, False),
        ("odd", False, True),
    ]
    state_checks = loaded.grading.state_checks
    assert state_checks is not None
    assert [action.tool_name for action in state_checks.golden_actions][-1] == "restock"
