"""The rubric judge from the host's side: the run setting, results, summary and the fail-loud publish rule."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from aiohttp import web

from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.cli import main
from tolokaforge.host.cli.run_command import judge_model_config
from tolokaforge.host.errors import ConfigError, PackLoadError
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

if TYPE_CHECKING:
    from conftest import ChatServer, Replies, Responder

TASK = "dc_data_addon_judged"


def _report(plain_words: float) -> str:
    verdicts: dict[str, Any] = {}
    for criterion, value in (
        ("price_before_purchase", True),
        ("new_cap_confirmed", True),
        ("plain_words", plain_words),
    ):
        met = value is True or (not isinstance(value, bool) and value >= 0.5)
        verdicts[f"{criterion}_justification"] = "seen in the transcript\nVERDICT: " + (
            "MET" if met else "NOT MET"
        )
        verdicts[criterion] = value
    verdicts["reasons"] = "price stated and accepted before the purchase"
    return json.dumps(verdicts)


def _trial(output: Path) -> tuple[dict[str, Any], dict[str, Any], Path]:
    folder = output / "trials" / TASK / "0"
    grade = yaml.safe_load((folder / "grade.yaml").read_text())
    trajectory = yaml.safe_load((folder / "trajectory.yaml").read_text())
    return grade, trajectory, folder


async def test_a_task_with_a_judge_and_no_judge_model_stops_the_run_before_any_trial(
    packs_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = load_pack(packs_dir / "dual_control")
    with pytest.raises(ConfigError) as caught:
        await run_pack(pack, GoldenAgentFactory(), UserRouter(), RunSettings(output=tmp_path / "run"))
    assert "1 task(s) grade with an LLM judge and no judge model is set: dc_data_addon_judged" in str(
        caught.value
    )
    assert not (tmp_path / "run").exists()
    # a selection without the judged task needs no judge model
    summary = await run_pack(
        pack,
        GoldenAgentFactory(),
        UserRouter(),
        RunSettings(output=tmp_path / "other", task_ids=("dc_roaming_abroad",)),
    )
    assert summary.pass_rate == 1.0 and "judge" not in summary.to_dict()


async def test_judge_on_a_local_endpoint_writes_results_transcript_and_separate_spend(
    packs_dir: Path,
    tmp_path: Path,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOLOKAFORGE_JUDGE_API_KEY", "test-key")

    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        if count == 1:
            arguments = '{"table": "lines", "path": "$[\'L-1008\'].data_cap_gb"}'
            return replies.completion(replies.tool_call("q1", "query_table", arguments), prompt_tokens=3000)
        return replies.completion(
            replies.tool_call("r1", "submit_report", _report(0.6)), prompt_tokens=4000, completion_tokens=500
        )

    server = await chat_server(respond)
    judge = judge_model_config("gpt-4o-mini", server.url, None)  # priced from the run's price table
    pack = load_pack(packs_dir / "dual_control")
    output = tmp_path / "run"
    settings = RunSettings(output=output, task_ids=(TASK,), judge_model=judge)
    summary = await run_pack(pack, GoldenAgentFactory(), UserRouter(), settings)

    grade, trajectory, folder = _trial(output)
    assert trajectory["grading_error"] is None
    assert grade["graded"] is True and grade["judge_status"] == "completed"
    assert grade["components"]["llm_judge"] == pytest.approx(0.6 * 2 / 3 + 1 / 3)
    assert [(r["id"], r["met"], r["score"]) for r in grade["criterion_results"]] == [
        ("price_before_purchase", True, 1.0),
        ("new_cap_confirmed", True, 1.0),
        ("plain_words", True, 0.6),
    ]
    assert grade["binary_pass"] is False  # combine "all" at threshold 1.0: the judge's 0.73 decides
    expected_cost = (7000 * 0.15 + 520 * 0.6) / 1e6
    assert grade["judge"] == {
        "calls": 2,
        "prompt_tokens": 7000,
        "completion_tokens": 520,
        "reasoning_tokens": 0,
        "cost_usd": pytest.approx(expected_cost),
        "tool_calls": 1,
        "agent_system_prompt_shown": True,
        "transcript": "judge_transcript.json",
    }
    transcript = json.loads((folder / "judge_transcript.json").read_text())
    assert transcript[2]["tool_calls"][0]["function"]["name"] == "query_table"
    assert transcript[3] == {
        "role": "tool",
        "tool_call_id": "q1",
        "content": "[6.0]",
    }  # the cap after the purchase
    assert "Beacon Mobile" in server.requests[0]["messages"][1]["content"]  # the agent's policy was shown
    saved = yaml.safe_load((output / "summary.yaml").read_text())
    assert saved["tokens"] == 0 and saved["cost_usd"] == 0.0  # the golden agent spent nothing
    assert saved["judge"] == {
        "trials_judged": 1,
        "calls": 2,
        "tokens": 7520,
        "cost_usd": pytest.approx(expected_cost),
    }
    assert summary.judge_spend() == saved["judge"]


async def test_an_errored_judge_publishes_no_score(
    packs_dir: Path,
    tmp_path: Path,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOLOKAFORGE_JUDGE_API_KEY", "test-key")

    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        return web.Response(status=503, text="overloaded")

    server = await chat_server(respond)
    judge = judge_model_config("some-unpriced-model", server.url, None)
    assert judge is not None and judge.price is None
    judge = judge.model_copy(update={"max_http_retries": 0})
    pack = load_pack(packs_dir / "dual_control")
    output = tmp_path / "run"
    summary = await run_pack(
        pack,
        GoldenAgentFactory(),
        UserRouter(),
        RunSettings(output=output, task_ids=(TASK,), judge_model=judge),
    )
    grade, trajectory, _ = _trial(output)
    assert (grade["graded"], grade["score"], grade["binary_pass"]) == (False, None, False)
    assert grade["judge_status"] == "errored" and grade["criterion_results"] == []
    assert grade["components"]["llm_judge"] is None and grade["components"]["state_checks"] == 1.0
    assert grade["judge"]["cost_usd"] is None  # no price for the model: unknown, not free
    assert trajectory["grading_error"].startswith(
        "Judge: errored -- judge endpoint failed after 1 attempts: HTTP 503"
    )
    assert summary.mean_score is None and summary.to_dict()["grading_errors"] == 1
    assert summary.to_dict()["judge"]["cost_usd"] is None


def test_cli_takes_the_judge_model_as_a_run_setting(
    packs_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ["run", "--pack", str(packs_dir / "dual_control"), "--task", TASK]
    with pytest.raises(SystemExit) as exit_info:
        main([*base, "--output", str(tmp_path / "refused")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert (
        error.startswith("tolokaforge: error (exit 2): 1 task(s) grade with an LLM judge")
        and error.count("\n") == 0
    )
    assert not (tmp_path / "refused").exists()

    monkeypatch.setenv("TOLOKAFORGE_JUDGE_MODEL", "tolokaforge-mock-judge")  # the option's variable
    with pytest.raises(SystemExit) as exit_info:
        main([*base, "--output", str(tmp_path / "mock")])
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out
    assert "judge calls / tokens" in printed and "judge cost (USD)" in printed
    grade, _, _ = _trial(tmp_path / "mock")
    assert grade["binary_pass"] is True and grade["judge_status"] == "completed"
    run_yaml = yaml.safe_load((tmp_path / "mock" / "run.yaml").read_text())
    assert run_yaml["models"]["judge"] == "tolokaforge-mock-judge"  # the judge is part of the run's identity

    with pytest.raises(SystemExit):
        main([*base, "--output", str(tmp_path / "bad"), "--judge-model", "tolokaforge-mock-judge:nonsense"])
    error = capsys.readouterr().err
    assert error.startswith("tolokaforge: error (exit 2): --judge-model 'tolokaforge-mock-judge:nonsense': ")
    assert (
        "expected tolokaforge-mock-judge or tolokaforge-mock-judge:unmet=ID,ID" in error
        and error.count("\n") == 1
    )


@pytest.mark.parametrize(
    ("llm_judge", "says"),
    [
        (
            {"rubric": "Be polite and correct."},
            "llm_judge.rubric is a string; write rubric: {reference: ..., criteria:",
        ),
        ({"rubric": [{"id": "x", "criterion": "polite"}]}, "llm_judge.rubric is a list; write rubric:"),
        (
            {"model_ref": "gpt-4o", "rubric": {"criteria": [{"id": "x", "description": "d"}]}},
            "drop model_ref and pass `tolokaforge run --judge-model M`",
        ),
        (
            {"output_schema": {}, "rubric": {"criteria": [{"id": "x", "description": "d"}]}},
            "the judge's report shape is fixed by the rubric: drop output_schema",
        ),
        (
            {"rubric": {"criteria": [{"id": "a", "description": "d"}, {"id": "a", "description": "e"}]}},
            "'a' appears twice",
        ),
        (
            {"rubric": {"criteria": [{"id": "has space", "description": "d"}]}},
            "criteria.0.id: String should match",
        ),
        (
            {"rubric": {"criteria": [{"id": "x_justification", "description": "d"}]}},
            "collides with the judge's report",
        ),
        (
            {"rubric": {"criteria": [{"id": "x", "description": "d", "kind": "scale"}]}},
            "'binary' or 'graded'",
        ),
        ({"rubric": {"criteria": []}}, "rubric.criteria: List should have at least 1 item"),
    ],
)
def test_pack_rubric_shape_is_checked_at_load_with_what_to_write_instead(
    pack_copy: Callable[[str], Path], llm_judge: dict[str, Any], says: str
) -> None:
    root = pack_copy("dual_control")
    grading = root / "tasks" / TASK / "grading.yaml"
    data = yaml.safe_load(grading.read_text())
    data["llm_judge"] = llm_judge
    grading.write_text(yaml.safe_dump(data))
    with pytest.raises(PackLoadError) as caught:
        load_pack(root)
    (problem,) = caught.value.problems
    assert problem.key.startswith("llm_judge") and says in str(problem), str(problem)
