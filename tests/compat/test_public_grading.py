"""The public_grading proof pack: public-format grading keys and state shapes, through the CLI.

Five tasks, each golden-replayed (pass) and run with a planted mistake (fail, naming the check):

- ``tally_counter``: a ``json_db`` of plain values beside a table (``counter: 0``, ``notes: [...]``),
  root-less JSONPaths (``$.counter``) with short operators (``op: gte``, ``lt``, ``ne``, ``eq``), hash
  grading and ``@init``/``@check`` custom checks reading ``ctx.effects["counter"]``;
- ``tally_mcp``: the same plain values held by an in-process-state MCP server (``create_server``);
- ``save_result``: ``state_checks.files`` by ``path`` with ``must_exist`` / ``must_contain``;
- ``lamp_check``: public ``state_checks.env_assertions`` (``func_name``, ``assert_value``) and an
  ``initialization_actions`` entry given by ``func_name``;
- ``judged_reply``: the legacy ``llm_judge`` shape (``model_ref``, a rubric text, ``output_schema``),
  judged by a real local HTTP server speaking the OpenAI chat API.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

if TYPE_CHECKING:
    from conftest import ChatServer, Cli, JudgeReport

PACK = Path(__file__).parent / "packs" / "public_grading"
JUDGE_KEY = "judge-secret"


def _grade(run: Path, task: str) -> dict[str, Any]:
    return yaml.safe_load((run / "trials" / task / "0" / "grade.yaml").read_text())


def _run(tmp_path: Path, cli: Cli, task: str, *extra: str, script: Any = None) -> dict[str, Any]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    run = tmp_path / f"run-{task}"
    agent = ["--agent", "golden"]
    if script is not None:
        path = tmp_path / f"{task}-script.yaml"
        path.write_text(yaml.safe_dump(script))
        agent = ["--agent", "scripted", "--script", str(path)]
    code, out = cli(["run", "--pack", str(PACK), "--task", task, *agent, "--output", str(run), *extra])
    assert code == 0, out  # graded, whatever the verdict
    return _grade(run, task)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


@pytest.fixture
def judge(
    monkeypatch: pytest.MonkeyPatch, chat_server: ChatServer, judge_report: JudgeReport
) -> tuple[str, list[dict[str, Any]]]:
    """A judge that reads the evidence: the agent's answer named -> 0.9, else 0.1; its URL and requests."""
    monkeypatch.setenv("TOLOKAFORGE_JUDGE_API_KEY", JUDGE_KEY)
    bodies: list[dict[str, Any]] = []

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        bodies.append(body)
        met = "Your parcel P-7 arrives on Friday" in json.dumps(body["messages"][1:])
        return judge_report(
            0.9 if met else 0.1, "the reply names the day" if met else "the reply gives no day"
        )

    return chat_server(JUDGE_KEY, answer), bodies


@pytest.fixture
def judge_url(judge: tuple[str, list[dict[str, Any]]]) -> str:
    return judge[0]


def test_the_pack_validates(cli: Cli) -> None:
    code, out = cli(["validate", "--pack", str(PACK)])
    assert code == 0, out
    assert "public_grading: 5 tasks" in out


def test_plain_values_golden_passes_with_rootless_paths_and_effects(tmp_path: Path, cli: Cli) -> None:
    grade = _run(tmp_path, cli, "tally_counter")
    assert (grade["binary_pass"], grade["score"]) == (True, 1.0), grade["reasons"]
    assert grade["reasons"] == [
        "State: hash match",
        "JSONPath: all 5 checks passed",
        "Custom checks: score=1.00 (3 passed, 0 failed, 0 skipped, 0 errored)",
    ]
    assert [row["message"] for row in grade["custom_checks"]][:2] == [
        "counter 0 -> 5",
        "notes kept as written",
    ]


def test_plain_values_planted_mistake_fails_naming_the_checks(tmp_path: Path, cli: Cli) -> None:
    grade = _run(tmp_path, cli, "tally_counter", script=[_call("update_counter", amount=4), {"done": True}])
    assert grade["binary_pass"] is False
    reasons = " | ".join(grade["reasons"])
    # A plain value shows in the state diff as its value table's one record (docs/pack-format.md).
    assert "State: 3 modified (counter[$value].value, notes[$value].value, operations[#0].amount)" in reasons
    assert "JSONPath: 2/5 checks passed" in reasons
    assert "the tally reached five" in reasons and "the note was kept" in reasons
    assert "counter_went_up_by_five failed: counter 0 -> 4, expected 0 -> 5" in reasons
    failed = {
        row["check_name"]: row["message"] for row in grade["custom_checks"] if row["status"] == "failed"
    }
    assert failed == {
        "counter_went_up_by_five": "counter 0 -> 4, expected 0 -> 5",
        "notes_are_plain_strings": "notes are ['opened', 'added 4']",
    }


def test_plain_values_reach_an_in_process_state_server(tmp_path: Path, cli: Cli) -> None:
    grade = _run(tmp_path, cli, "tally_mcp")
    assert (grade["binary_pass"], grade["score"]) == (True, 1.0), grade["reasons"]
    assert grade["reasons"] == ["State: hash match", "JSONPath: all 2 checks passed"]
    mistake = _run(
        tmp_path / "mistake", cli, "tally_mcp", script=[_call("add_to_tally", amount=2), {"done": True}]
    )
    assert mistake["binary_pass"] is False
    reasons = " | ".join(mistake["reasons"])
    assert "State: 2 modified (counter[$value].value, notes[$value].value)" in reasons
    assert "JSONPath: 0/2 checks passed" in reasons and "the tally is three" in reasons


def test_files_by_path_golden_passes(tmp_path: Path, cli: Cli) -> None:
    grade = _run(tmp_path, cli, "save_result")
    assert (grade["binary_pass"], grade["score"]) == (True, 1.0), grade["reasons"]
    assert grade["reasons"][0] == "Files: all 2 checks passed"


def test_files_by_path_planted_mistake_fails_naming_the_file(tmp_path: Path, cli: Cli) -> None:
    script = [
        _call("write_file", path="result.txt", content="392\n"),
        _call("write_file", path="scratch.txt", content="17*23"),
        {"content": "It is 391.", "done": True},
    ]
    grade = _run(tmp_path, cli, "save_result", script=script)
    assert grade["binary_pass"] is False and grade["components"]["state_checks"] == 0.0
    reasons = " | ".join(grade["reasons"])
    assert "Files: 0/2 checks passed" in reasons
    assert "result.txt: contains '391' holds in none of 1 file(s)" in reasons
    assert "scratch.txt" in reasons


def test_public_env_assertions_and_func_name_init_golden_passes(tmp_path: Path, cli: Cli) -> None:
    grade = _run(tmp_path, cli, "lamp_check")
    assert (grade["binary_pass"], grade["score"]) == (True, 1.0), grade["reasons"]
    assert grade["components"]["env_assertions"] == 1.0
    assert grade["reasons"][0] == "Env assertions: all 1 hold"


def test_public_env_assertions_planted_mistake_fails_naming_the_assertion(tmp_path: Path, cli: Cli) -> None:
    # The lamp exists only because the func_name initialization action installed it: listing it proves so.
    grade = _run(
        tmp_path, cli, "lamp_check", script=[_call("list_lamps"), {"content": "Done.", "done": True}]
    )
    assert (grade["binary_pass"], grade["score"]) == (False, 0.0)
    assert (
        grade["reasons"][0] == "Env assertions: 0/1 hold; [0] the hall lamp is on: expected true, got false"
    )
    trajectory = yaml.safe_load(
        (tmp_path / "run-lamp_check" / "trials" / "lamp_check" / "0" / "trajectory.yaml").read_text()
    )
    answers = [m["content"] for m in trajectory["messages"] if m["role"] == "tool"]
    assert json.loads(answers[0]) == [{"lamp_id": "L-1", "room": "hall", "on": False}]


def test_legacy_judge_golden_passes(
    tmp_path: Path, cli: Cli, judge: tuple[str, list[dict[str, Any]]]
) -> None:
    judge_url, bodies = judge
    grade = _run(tmp_path, cli, "judged_reply", "--judge-model", "judge-1", "--judge-base-url", judge_url)
    assert (grade["binary_pass"], grade["score"]) == (True, 0.9), grade["reasons"]
    preflight, judged = bodies[0], bodies[1]  # the run's one-token check of the judge model comes first
    assert preflight["model"] == "judge-1" and preflight["max_completion_tokens"] == 1
    system = judged["messages"][0]["content"]
    assert "parcel P-7 arrives on Friday" in system or "parcel P-7 arrives on Friday" in json.dumps(judged)


def test_legacy_judge_planted_mistake_fails(tmp_path: Path, cli: Cli, judge_url: str) -> None:
    script = [{"content": "Your parcel is on its way.", "done": True}]
    grade = _run(
        tmp_path,
        cli,
        "judged_reply",
        "--judge-model",
        "judge-1",
        "--judge-base-url",
        judge_url,
        script=script,
    )
    assert (grade["binary_pass"], grade["score"]) == (False, 0.1), grade["reasons"]
    assert grade["reasons"] == ["Judge: score=0.10 (0/1 criteria met; the reply gives no day)"]


def test_refused_public_grading_keys_are_named(tmp_path: Path, cli: Cli) -> None:
    pack = tmp_path / "public_grading"
    shutil.copytree(PACK, pack, ignore=shutil.ignore_patterns("__pycache__"))
    grading = pack / "tasks" / "tally_counter" / "grading.yaml"
    data = yaml.safe_load(grading.read_text())
    data["state_checks"]["jsonpaths"][0]["op"] = "between"
    data["state_checks"]["jsonpaths"][1]["path"] = "$.nowhere"
    data["state_checks"]["db_hash_check"] = True
    grading.write_text(yaml.safe_dump(data))
    code, out = cli(["validate", "--pack", str(pack)])
    assert code == 1
    assert "state_checks.jsonpaths[0].op: unknown operator 'between'" in out
    assert "state_checks.jsonpaths[1].path: '$.nowhere' must address the trial's state" in out
    assert "state_checks.db_hash_check: is not supported" in out
