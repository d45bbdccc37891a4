"""What the loader refuses of a public-style pack: each key named with its file and why, all in one pass."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tolokaforge.host.cli import cli
from tolokaforge.host.errors import PackLoadError
from tolokaforge.host.packs import load_pack

LIBRARY = Path(__file__).parent / "fixtures" / "packs" / "library"
TASK = Path("library/tasks/lend_book/task.yaml")
GRADING = Path("library/tasks/lend_book/grading.yaml")


@pytest.fixture
def library(tmp_path: Path) -> Path:
    target = tmp_path / "library"
    shutil.copytree(LIBRARY, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _problems(root: Path) -> dict[tuple[Path, str], str]:
    with pytest.raises(PackLoadError) as caught:
        load_pack(root)
    return {(p.file, p.key): p.message for p in caught.value.problems}


def test_one_pass_reports_a_broken_task_file_and_its_grading_file(library: Path) -> None:
    _edit(library / "tasks/lend_book/task.yaml", lambda d: d.update(colour="blue"))
    _edit(library / "tasks/lend_book/grading.yaml", lambda d: d["state_checks"]["hash"].pop("weight"))
    problems = _problems(library)
    assert problems[(TASK, "colour")] == "unknown key 'colour' (not part of the schema)"
    assert (
        "is required when hash and jsonpaths (or file checks) both score"
        in problems[(GRADING, "state_checks.hash.weight")]
    )


def test_the_validate_command_prints_every_problem(library: Path) -> None:
    _edit(library / "tasks/lend_book/task.yaml", lambda d: d.update(colour="blue"))
    _edit(library / "tasks/lend_book/grading.yaml", lambda d: d["combine"]["weights"].pop("custom_checks"))
    result = CliRunner().invoke(cli, ["validate", "--pack", str(library)])
    assert result.exit_code == 1
    assert "task.yaml: colour: unknown key" in result.output
    assert "grading.yaml: combine.weights: declares no weight for custom_checks" in result.output


def test_public_keys_without_a_meaning_here_are_refused_by_name(library: Path) -> None:
    def task(d: dict[str, Any]) -> None:
        d["initial_state"]["json_db"]["opened"] = {"$value": {"value": "2024-01-01"}}
        d["initial_state"]["filesystem"] = {"copy": [{"from": "checks.py", "to": "/etc/checks.py"}]}
        d["initial_state"]["mock_web"] = {
            "base_url": "http://mock-web:8080",
            "routes": "mock_web/routes.yaml",
        }
        d["actors"]["user"]["scripted_flow"].append({"if_assistant_contains": "name", "default": "Ada"})
        d["actors"]["user"]["scripted_flow"].append({"role": "assistant", "content": "hello"})
        d["policies"]["tone"] = ["calm"]

    def grading(d: dict[str, Any]) -> None:
        hash_block = d["state_checks"]["hash"]
        hash_block["expected_state_hash"] = "0" * 64
        d["state_checks"]["jsonpaths"][0]["required"] = False
        d["state_checks"]["jsonpaths"][1] = {"path_glob": "/srv/*", "contains_ci": "x"}
        d["state_checks"]["jsonpaths"].append({"path": "$.db.loans", "op": "bigger", "expected": 1})
        d["state_checks"]["files"] = [{"path_glob": "*.txt", "greater_than": 3}]
        d["custom_checks"].update(interface_version="2.0", weight=0.5)

    _edit(library / "tasks/lend_book/task.yaml", task)
    _edit(library / "tasks/lend_book/grading.yaml", grading)
    problems = _problems(library)
    assert "would read as a plain value" in problems[(TASK, "initial_state.json_db.opened")]
    assert "must lie in the workspace" in problems[(TASK, "initial_state.filesystem.copy[0].to")]
    # The public docs' routes.yaml (canned answers) is not what our routes key names: a python module.
    assert (
        "is not supported: routes names a python module" in problems[(TASK, "initial_state.mock_web.routes")]
    )
    assert "not both in one turn" in problems[(TASK, "actors.user.scripted_flow[1]")]
    assert "must be 'user'" in problems[(TASK, "actors.user.scripted_flow[2].role")]
    assert "unknown policy key" in problems[(TASK, "policies.tone")]
    assert (
        "give those instead of a literal digest"
        in problems[(GRADING, "state_checks.hash.expected_state_hash")]
    )
    assert "every state check is scored" in problems[(GRADING, "state_checks.jsonpaths[0].required")]
    assert "must lie in the workspace" in problems[(GRADING, "state_checks.jsonpaths[1].path_glob")]
    assert "unknown operator 'bigger'" in problems[(GRADING, "state_checks.jsonpaths[2].op")]
    assert "is not a file-check operator" in problems[(GRADING, "state_checks.files[0].greater_than")]
    assert "'2.0' is not supported (supported: 1.0)" in problems[(GRADING, "custom_checks.interface_version")]
    assert "only 1.0 has a meaning" in problems[(GRADING, "custom_checks.weight")]


def test_enabled_tools_no_source_provides_are_an_error(library: Path) -> None:
    _edit(library / "tasks/lend_book/task.yaml", lambda d: d["tools"]["agent"].pop("python"))
    _edit(library / "tasks/lend_book/grading.yaml", lambda d: d["state_checks"]["hash"].update(enabled=False))
    problems = _problems(library)
    message = problems[(TASK, "tools.agent.enabled")]
    assert "no tool source provides 'find_book', 'lend_book'" in message


def test_a_custom_checks_import_folder_must_exist_inside_the_pack(library: Path) -> None:
    _edit(
        library / "tasks/lend_book/grading.yaml",
        lambda d: d["custom_checks"].update(relative_imports=["../../../outside", "nowhere"]),
    )
    (library.parent / "outside").mkdir()
    problems = _problems(library)
    assert "must lie inside the pack" in problems[(GRADING, "custom_checks.relative_imports[0]")]
    assert "folder 'nowhere' not found" in problems[(GRADING, "custom_checks.relative_imports[1]")]


def test_declared_packages_missing_here_are_named(library: Path) -> None:
    _edit(
        library / "pack.yaml",
        lambda d: d.update(requires=["pyyaml", "no-such-dist-xyz", "pyyaml>=999", "!!"]),
    )
    problems = _problems(library)
    pack = Path("library/pack.yaml")
    assert (pack, "requires[0]") not in problems
    assert problems[(pack, "requires[1]")] == "'no-such-dist-xyz' is not installed in this environment"
    assert "the pack needs >=999" in problems[(pack, "requires[2]")]
    assert "is not a requirement" in problems[(pack, "requires[3]")]


def test_a_checks_file_that_cannot_import_is_refused_before_the_run(library: Path) -> None:
    _edit(library / "tasks/lend_book/grading.yaml", lambda d: d["custom_checks"].update(relative_imports=[]))
    problems = _problems(library)
    message = problems[(GRADING, "custom_checks.file")]
    assert message.startswith("cannot be loaded, so every grade would fail: importing the checks file raised")
    assert "No module named 'loan_rules'" in message
