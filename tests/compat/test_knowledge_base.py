"""The knowledge_base proof pack: ``search_kb`` over a task's ``initial_state.rag`` corpus, through the CLI.

Golden replay passes and reads the right document; a scripted agent that answers against the handbook
fails on the rule it broke; bad ``rag`` blocks are refused by ``validate`` with the key's path.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

if TYPE_CHECKING:
    from conftest import Cli

PACK = Path(__file__).parent / "packs" / "knowledge_base"
TASK = Path("tasks/support/handbook_lookup")


def _trial(run: Path) -> dict[str, Any]:
    return yaml.safe_load((run / "trials" / "handbook_lookup" / "0" / "trajectory.yaml").read_text())


def test_golden_replay_passes_and_finds_the_laptop_policy(tmp_path: Path, cli: Cli) -> None:
    code, out = cli(["run", "--pack", str(PACK), "--agent", "golden", "--output", str(tmp_path / "run")])
    assert code == 0, out
    assert out.strip().splitlines()[-1] == "exit 0: all 2 trials graded; pass rate 1.000 (2/2 passed)"
    [tool_message] = [m for m in _trial(tmp_path / "run")["messages"] if m["role"] == "tool"]
    answer = json.loads(tool_message["content"])
    assert answer["query"] == "laptop replacement" and answer["total"] == 1  # top_k 2, one document matches
    [hit] = answer["results"]
    assert hit["source"] == "laptops.md" and hit["retrieval_method"] == "bm25"
    assert "three years old" in hit["text"] and hit["score"] == 0.5  # the public weighting at alpha 0.5


def test_a_wrong_answer_fails_naming_the_rule_and_a_bad_argument_is_invalid_arguments(
    tmp_path: Path, cli: Cli
) -> None:
    script = tmp_path / "wrong.yaml"
    script.write_text(
        yaml.safe_dump(
            [
                {"tool_calls": [{"name": "search_kb", "arguments": {"query": "train tickets", "alpha": 0}}]},
                {"tool_calls": [{"name": "search_kb", "arguments": {"query": "laptop", "top_k": 0}}]},
                {"content": "You can replace it after one year; ask your manager.", "done": True},
            ]
        )
    )
    run = tmp_path / "run"
    code, out = cli(
        [
            "run",
            "--pack",
            str(PACK),
            "--task",
            "handbook_lookup",
            "--agent",
            "scripted",
            "--script",
            str(script),
            "--output",
            str(run),
        ]
    )
    assert code == 0, out
    summary = yaml.safe_load((run / "summary.yaml").read_text())
    [failure] = summary["failures"]
    assert failure["kind"] == "failed"
    assert "did not communicate 'three years'" in failure["reason"]
    calls = _trial(run)["tool_calls"]
    assert calls[0]["status"] == "SUCCESS"
    [travel] = json.loads(_trial(run)["messages"][2]["content"])["results"]
    assert travel["source"] == "travel.md" and travel["score"] == 1.0  # alpha 0: keyword weight 1
    assert calls[1]["status"] == "INVALID_ARGUMENTS" and calls[1]["error_category"] == "INVALID_ARGUMENTS"


def test_beside_the_packs_own_tool_a_wrong_answer_recorded_fails_on_state(tmp_path: Path, cli: Cli) -> None:
    script = tmp_path / "wrong.yaml"
    close = {"name": "close_ticket", "arguments": {"ticket_id": "T-12", "answer": "up to 30 euros a day"}}
    turns = [
        {"tool_calls": [{"name": "search_kb", "arguments": {"query": "meals on a trip"}}]},
        {"tool_calls": [close]},
        {"content": "Closed.", "done": True},
    ]
    script.write_text(yaml.safe_dump(turns))
    run = tmp_path / "run"
    args = [
        "run",
        "--pack",
        str(PACK),
        "--task",
        "answer_and_close",
        "--agent",
        "scripted",
        "--script",
        str(script),
    ]
    code, out = cli([*args, "--output", str(run)])
    assert code == 0, out
    [failure] = yaml.safe_load((run / "summary.yaml").read_text())["failures"]
    assert failure == {
        "task_id": "answer_and_close",
        "trial_index": 0,
        "kind": "failed",
        "reason": "State: 1 modified (tickets[T-12].answer)",
    }
    trajectory = yaml.safe_load((run / "trials" / "answer_and_close" / "0" / "trajectory.yaml").read_text())
    [hit, *_] = json.loads(trajectory["messages"][2]["content"])["results"]
    assert hit["source"] == "expenses.md"  # this task's own corpus, not the other task's


def _broken_copy(tmp_path: Path, rag: dict[str, Any] | None, enabled: list[str]) -> Path:
    root = tmp_path / "pack"
    shutil.copytree(PACK, root)
    task_file = root / TASK / "task.yaml"
    task = yaml.safe_load(task_file.read_text())
    if rag is None:
        del task["initial_state"]["rag"]
    else:
        task["initial_state"]["rag"] = rag
    task["tools"]["agent"]["enabled"] = enabled
    task_file.write_text(yaml.safe_dump(task))
    return root


@pytest.mark.parametrize(
    ("rag", "enabled", "key", "says"),
    [
        (
            {"corpus_dir": "rag/corpus", "embeddings": "minilm"},
            ["search_kb"],
            "initial_state.rag.embeddings",
            "not supported",
        ),
        (
            {"corpus_dir": "rag/nowhere"},
            ["search_kb"],
            "initial_state.rag.corpus_dir",
            "not a folder inside the pack",
        ),
        (
            {"corpus_dir": "../../../../../.."},
            ["search_kb"],
            "initial_state.rag.corpus_dir",
            "not a folder inside the pack",
        ),
        ({}, ["search_kb"], "initial_state.rag.corpus_dir", "is required"),
        (None, ["search_kb"], "tools.agent.enabled[0]", "search_kb needs initial_state.rag.corpus_dir"),
    ],
)
def test_validate_refuses_a_bad_rag_block_with_its_key(
    tmp_path: Path,
    cli: Cli,
    rag: dict[str, Any] | None,
    enabled: list[str],
    key: str,
    says: str,
) -> None:
    root = _broken_copy(tmp_path, rag, enabled)
    code, out = cli(["validate", "--pack", str(root)])
    assert code != 0
    assert key in out and says in out, out


def test_validate_refuses_an_empty_corpus(tmp_path: Path, cli: Cli) -> None:
    root = _broken_copy(tmp_path, {"corpus_dir": "rag/empty"}, ["search_kb"])
    (root / TASK / "rag" / "empty").mkdir()
    (root / TASK / "rag" / "empty" / "blank.md").write_text("  \n")
    code, out = cli(["validate", "--pack", str(root)])
    assert code != 0 and "holds no non-empty .md or .txt document" in out, out


def test_validate_refuses_a_pack_folder_named_like_our_tool_code(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "pack"
    shutil.copytree(PACK, root)
    (root / "_tolokaforge_builtin").mkdir()
    (root / "_tolokaforge_builtin" / "knowledge_base.py").write_text("TOOLS = {}\n")
    code, out = cli(["validate", "--pack", str(root)])
    assert code != 0
    assert "tools.agent.enabled: the pack's folder _tolokaforge_builtin/ is reserved" in out, out
