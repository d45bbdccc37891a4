"""The db_tools proof pack: the built-in ``db_query``, ``db_update``, ``sql_query`` and ``get_db_schema``
enabled by name over ``json_db`` tables, through the CLI and the embedded runner (the tools run in the
trial's sandboxed worker).

Golden replay passes (hash and JSONPath checks); a scripted agent that orders one book too few fails
naming the check; bad JSONPaths, bad SQL, unknown tables and SQL writes are answers the model reads,
and a ``db_update`` that fails part way leaves the tables as they were.
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

PACK = Path(__file__).parent / "packs" / "db_tools"


def _scripted(tmp_path: Path, turns: list[dict[str, Any]], cli: Cli) -> Path:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(turns))
    run = tmp_path / "run"
    code, out = cli(
        ["run", "--pack", str(PACK), "--agent", "scripted", "--script", str(script), "--output", str(run)]
    )
    assert code == 0, out  # every trial graded: a tool's error is an answer, never a runner failure
    return run


def _trial(run: Path) -> dict[str, Any]:
    return yaml.safe_load((run / "trials" / "restock_shelf" / "0" / "trajectory.yaml").read_text())


def _answers(run: Path) -> list[str]:
    return [message["content"] for message in _trial(run)["messages"] if message["role"] == "tool"]


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def test_the_pack_validates(cli: Cli) -> None:
    code, out = cli(["validate", "--pack", str(PACK)])
    assert code == 0, out
    assert "db_tools: 1 tasks, 4 tools: OK" in out


@pytest.mark.parametrize("isolation", ["sandbox", "thread"])
def test_golden_replay_passes(isolation: str, tmp_path: Path, cli: Cli) -> None:
    # thread: the tools of concurrent trials share one module (and SQL view) in the runner's process.
    run = tmp_path / "run"
    code, out = cli(
        [
            "run",
            "--pack",
            str(PACK),
            "--agent",
            "golden",
            "--isolation",
            isolation,
            "--trials",
            "2",
            "--output",
            str(run),
        ]
    )
    assert code == 0, out
    assert out.strip().splitlines()[-1] == "exit 0: all 2 trials graded; pass rate 1.000 (2/2 passed)"
    grade = yaml.safe_load((run / "trials" / "restock_shelf" / "0" / "grade.yaml").read_text())
    assert grade["reasons"][:2] == ["State: hash match", "JSONPath: all 3 checks passed"]
    schema, sold_out, updated, found, _ = _answers(run)
    assert schema.startswith("Database Schema:\n")
    assert [column["name"] for column in json.loads(schema.split("\n", 1)[1])["orders"]] == [
        "order_id",
        "isbn",
        "quantity",
        "status",
    ]
    assert json.loads(sold_out) == [
        {"isbn": "978-0441013593", "title": "Dune"},
        {"isbn": "978-0547928227", "title": "The Hobbit"},
    ]
    assert updated == "Database updated successfully. Operations applied: 2"
    assert json.loads(found)[0]["status"] == "ordered"


def test_ordering_one_book_too_few_fails_naming_the_check(tmp_path: Path, cli: Cli) -> None:
    dune = "978-0441013593"
    run = _scripted(
        tmp_path,
        [
            _call("sql_query", query="SELECT isbn FROM books WHERE stock = 0"),
            _call(
                "db_update",
                ops=[
                    {
                        "op": "add",
                        "path": "$.orders.new",
                        "value": {"order_id": "PO-2", "isbn": dune, "quantity": 5},
                    },
                    {"op": "replace", "path": f"$.books[?(@.isbn == '{dune}')].stock", "value": 5},
                ],
            ),
            {"content": "Dune is ordered and back on the shelf.", "done": True},
        ],
        cli,
    )
    summary = yaml.safe_load((run / "summary.yaml").read_text())
    [failure] = summary["failures"]
    assert failure["kind"] == "failed"
    assert "two orders were added: expected length 3, got 2" in failure["reason"]
    assert "1 removed (orders[PO-3])" in failure["reason"]  # the hash check's diff against the golden state


def test_errors_are_answers_the_model_reads_and_a_failed_update_changes_nothing(
    tmp_path: Path, cli: Cli
) -> None:
    run = _scripted(
        tmp_path,
        [
            _call("db_query", jsonpath="$.books[?(@.stock =="),
            _call("sql_query", query="SELECT * FROM shelves"),
            _call("sql_query", query="SELEKT 1"),
            _call("sql_query", query="UPDATE books SET stock = 100"),
            _call(
                "db_update",
                ops=[
                    {"op": "replace", "path": "$.books[0].stock", "value": 42},
                    {"op": "replace", "path": "$.books[99].stock", "value": 1},
                ],
            ),
            _call("db_update", ops=[{"op": "rename", "path": "$.books[0]"}]),
            _call("sql_query", query="SELECT stock FROM books WHERE title = 'Dune'"),
            {"content": "Nothing changed.", "done": True},
        ],
        cli,
    )
    answers = _answers(run)
    assert answers[0].startswith("Error: Query failed: '$.books[?(@.stock ==' is not a JSONPath")
    assert answers[1] == "Error: SQL query failed: no such table: shelves"
    assert answers[2] == 'Error: SQL query failed: near "SELEKT": syntax error'
    assert answers[3] == (
        "Error: SQL query failed: sql_query is read-only (only SELECT statements and reading pragmas are "
        "allowed); use db_update"
    )
    assert answers[4] == "Error: UpdateFailed: operation 1 (replace $.books[99].stock): path not found"
    assert (
        answers[6] == '[\n  {\n    "stock": 0\n  }\n]'
    )  # neither the refused write nor the failed update's first op
    calls = _trial(run)["tool_calls"]
    assert [call["status"] for call in calls] == [
        "ERROR",
        "ERROR",
        "ERROR",
        "ERROR",
        "ERROR",
        "INVALID_ARGUMENTS",  # "rename" is not in the schema's enum: the runner refuses it before the tool
        "SUCCESS",
    ]
    assert [call["error_category"] for call in calls[:5]] == ["EXECUTION_FAILED"] * 5


def test_a_pack_folder_named_like_the_shipped_code_is_refused(tmp_path: Path, cli: Cli) -> None:
    pack = tmp_path / "db_tools"
    shutil.copytree(PACK, pack)
    (pack / "_tolokaforge_builtin").mkdir()
    (pack / "_tolokaforge_builtin" / "db_tools.py").write_text("TOOLS = {}\n")
    code, out = cli(["validate", "--pack", str(pack)])
    assert code != 0, out
    assert (
        "tools.agent.enabled" in out
        and "_tolokaforge_builtin/ in the pack is reserved for built-in tools" in out
    )
