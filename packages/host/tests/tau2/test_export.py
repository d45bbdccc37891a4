"""The τ² export's parts: our transcript as τ²'s messages (which τ²'s own replay accepts), our
terminations as τ²'s, our grade as τ²'s RewardInfo, pass^k as τ² computes it, and what is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tolokaforge.core.termination import TerminationReason
from tolokaforge.host.cli import main
from tolokaforge.host.errors import ConfigError
from tolokaforge.host.packs.tau2 import tau2_task
from tolokaforge.host.packs.tau2.simulations import (
    TERMINATIONS,
    tau2_messages,
    tau2_reward_info,
    tau2_termination,
)
from tolokaforge.host.results.summary import RunSummary, TrialRow
from tolokaforge.host.results.tau2_export import tau2_results

tau2_simulation = pytest.importorskip("tau2.data_model.simulation")
tau2_message = pytest.importorskip("tau2.data_model.message")
retail = pytest.importorskip("tau2.domains.retail.environment")


def _call(call_id: str, name: str, arguments: dict[str, Any], executor: str = "agent", **more: Any) -> Any:
    return {
        "call_id": call_id,
        "name": name,
        "executor": executor,
        "arguments": json.dumps(arguments),
        "status": "SUCCESS",
        **more,
    }


def _live_answer(env: Any, name: str, arguments: dict[str, Any], requestor: str = "assistant") -> Any:
    return env.get_response(
        tau2_message.ToolCall(id="x", name=name, arguments=arguments, requestor=requestor)
    )


def test_a_transcript_becomes_the_messages_tau2_replays() -> None:
    """System prompt left out; each call answered right after it, in call order; content None for a
    message of calls only; the error flag from the call's status; τ²'s own replay accepts the result."""
    env = retail.get_environment()
    find = {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}
    found = _live_answer(env, "find_user_id_by_name_zip", find)
    missing = _live_answer(env, "no_such_tool", {})
    bad = _live_answer(env, "get_user_details", {"user_id": found.content, "not_an_argument": 1})
    assert missing.error and bad.error
    trajectory: dict[str, Any] = {
        "messages": [
            {"role": "system", "content": "policy"},
            {"role": "assistant", "content": "Hi! How can I help you today?"},
            {"role": "user", "content": "I am Yusuf Rossi, 19122."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "name": "find_user_id_by_name_zip", "arguments": find},
                    {"id": "c2", "name": "no_such_tool", "arguments": {}},
                ],
            },
            # our transcript may answer out of call order: τ² wants call order
            {"role": "tool", "content": missing.content, "tool_call_id": "c2"},
            {"role": "tool", "content": found.content, "tool_call_id": "c1"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c3",
                        "name": "get_user_details",
                        "arguments": {"user_id": found.content, "not_an_argument": 1},
                    }
                ],
            },
            {"role": "tool", "content": bad.content, "tool_call_id": "c3"},
            {"role": "assistant", "content": "Done. ###STOP###"},
        ],
        "tool_calls": [
            _call("c1", "find_user_id_by_name_zip", find, output_in_message=5),
            _call("c2", "no_such_tool", {}, status="ERROR", error="Tool 'no_such_tool' not found."),
            _call("c3", "get_user_details", {"user_id": found.content, "not_an_argument": 1}, status="ERROR"),
        ],
    }
    messages = tau2_messages(trajectory)
    kinds = [type(message).__name__ for message in messages]
    assert kinds == [
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "ToolMessage",
        "AssistantMessage",
        "ToolMessage",
        "AssistantMessage",
    ]
    assert [message.turn_idx for message in messages] == list(range(8))
    assert all(message.timestamp is None for message in messages)
    calls = messages[2]
    assert calls.content is None and [call.id for call in calls.tool_calls] == ["c1", "c2"]
    assert calls.tool_calls[0] == tau2_message.ToolCall(
        id="c1", name="find_user_id_by_name_zip", arguments=find, requestor="assistant"
    )
    assert [(m.id, m.error, m.requestor) for m in messages[3:5]] == [
        ("c1", False, "assistant"),
        ("c2", True, "assistant"),
    ]
    assert messages[3].content == "yusuf_rossi_9620" and messages[6].error
    assert messages[-1].content == "Done. ###STOP###" and messages[-1].tool_calls is None
    # τ²'s evaluator replays exactly this (set_state raises on an order, id or output it does not expect)
    replay = retail.get_environment()
    replay.set_state(initialization_data=None, initialization_actions=None, message_history=messages)


def test_user_side_calls_keep_their_requestor_and_an_unanswered_call_gets_its_recorded_answer() -> None:
    trajectory: dict[str, Any] = {
        "messages": [
            {"role": "assistant", "content": "Hi! How can I help you today?"},
            {"role": "user", "content": "", "tool_calls": [{"id": "u1", "name": "toggle_airplane_mode"}]},
            {"role": "assistant", "content": "ok", "tool_calls": [{"id": "a1", "name": "f"}]},
        ],
        "tool_calls": [
            # arguments not decodable in the message: taken from the call's record, as sent
            _call("u1", "toggle_airplane_mode", {"on": True}, executor="user", output="Airplane mode ON"),
            _call("a1", "f", {}, status="ERROR", error="boom"),
        ],
    }
    messages = tau2_messages(trajectory)
    user, answer, agent, failed = messages[1:]
    assert user.role == "user" and user.content is None
    assert user.tool_calls[0].requestor == "user" and user.tool_calls[0].arguments == {"on": True}
    assert (answer.id, answer.requestor, answer.content, answer.error) == (
        "u1",
        "user",
        "Airplane mode ON",
        False,
    )
    assert agent.content == "ok"  # text beside calls is kept (τ² allows it unless it enforces its protocol)
    assert (failed.id, failed.content, failed.error) == ("a1", "Error: boom", True)


def test_every_termination_of_ours_has_its_tau2_reason() -> None:
    reasons = {member.value for member in tau2_simulation.TerminationReason}
    assert set(TERMINATIONS) == {reason.value for reason in TerminationReason}, "a new reason needs a mapping"
    assert set(TERMINATIONS.values()) <= reasons
    assert tau2_termination("agent_done") == "agent_stop"
    assert tau2_termination("user_stop") == "user_stop"
    assert tau2_termination("max_turns") == "max_steps"
    assert tau2_termination("too_many_errors") == "too_many_errors"
    assert tau2_termination("error") == "agent_error"
    assert tau2_termination(None) == "agent_error" and tau2_termination("made_up") == "agent_error"


def _grade(score: float | None, components: dict[str, float | None], items: list[dict[str, Any]]) -> Any:
    return {
        "graded": score is not None,
        "binary_pass": score == 1.0,
        "score": score,
        "components": components,
        "reasons": ["State: hash match"],
        "component_items": items,
    }


def test_a_grade_becomes_rewardinfo_per_reward_type() -> None:
    task = tau2_task("tau2:retail", "2")  # basis DB, COMMUNICATE; one string to communicate
    grade = _grade(
        0.0,
        {"state_checks": 1.0, "tau2_communicate": 0.0, "transcript_rules": None},
        [{"component": "tau2_communicate", "index": 0, "label": "10", "met": False, "message": "not said"}],
    )
    info = tau2_reward_info(grade, task, "agent_stop")
    assert info.reward == 0.0
    assert {k.value: v for k, v in info.reward_breakdown.items()} == {"DB": 1.0, "COMMUNICATE": 0.0}
    assert [k.value for k in info.reward_basis] == ["DB", "COMMUNICATE"]
    assert info.db_check.db_match and info.db_check.db_reward == 1.0
    assert [(c.info, c.met, c.justification) for c in info.communicate_checks] == [("10", False, "not said")]
    assert info.info["tolokaforge"]["score"] == 0.0
    # as τ²'s evaluator: an ending other than the agent's or the user's has no basis and no breakdown
    early = tau2_reward_info(grade, task, "max_steps")
    assert early.reward == 0.0 and early.reward_basis is None and early.reward_breakdown is None
    # a trial without a grade is a failed simulation
    assert tau2_reward_info(None, task, "agent_stop").reward == 0.0


def test_env_assertions_and_actions_come_from_their_items() -> None:
    pytest.importorskip("tau2.domains.mock.environment")
    task = next(
        task
        for task in (tau2_task("tau2:mock", task_id) for task_id in _mock_ids())
        if task.evaluation_criteria is not None and task.evaluation_criteria.actions
    )
    actions = task.evaluation_criteria.actions
    items = [
        {"component": "tau2_actions", "index": i, "label": a.action_id, "met": i == 0, "message": ""}
        for i, a in enumerate(actions)
    ]
    info = tau2_reward_info(_grade(0.0, {"state_checks": 0.0, "tau2_actions": 0.0}, items), task, "user_stop")
    assert [check.action_match for check in info.action_checks] == [i == 0 for i in range(len(actions))]
    assert [check.action for check in info.action_checks] == list(actions)
    assert not info.db_check.db_match


def _mock_ids() -> list[str]:
    from tolokaforge.host.packs.tau2.ids import local_task_ids

    module = pytest.importorskip("tau2.domains.mock.environment")
    return list(local_task_ids(task.id for task in module.get_tasks(None)).values())


def test_pass_hat_ks_is_tau2s_compute_metrics() -> None:
    """k = 1 .. the fewest trials of any task; a trial without a grade fails."""
    agent_metrics = pytest.importorskip("tau2.metrics.agent_metrics")
    summary = RunSummary(pack="tau2-retail", agent="golden", trials_per_task=3)
    outcomes = {"a": ["passed", "passed", "failed"], "b": ["passed", "not_gradeable", "unfinished"]}
    for task_id, kinds in outcomes.items():
        for index, kind in enumerate(kinds):
            summary.rows.append(TrialRow(task_id, index, kind, ""))  # pyright: ignore[reportArgumentType]
    ours = summary.pass_hat_ks()
    assert list(ours) == [1, 2, 3]
    for k, value in ours.items():
        expected = (agent_metrics.pass_hat_k(3, 2, k) + agent_metrics.pass_hat_k(3, 1, k)) / 2
        assert value == pytest.approx(expected)
        assert value == pytest.approx(summary.pass_hat(k))
    assert summary.to_dict()["pass_hat_ks"] == ours
    assert RunSummary(pack="p", agent="golden", trials_per_task=1).pass_hat_ks() == {}


def _run_yaml(run_dir: Path, **values: Any) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.yaml").write_text(yaml.safe_dump(values))
    return run_dir


def test_a_run_that_is_not_tau2_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_yaml(tmp_path / "run", pack={"name": "retail"}, options={"pack": "examples/packs/retail"})
    with pytest.raises(ConfigError, match="is not a τ² run"):
        tau2_results(run)
    with pytest.raises(SystemExit) as done:
        main(["export", "--format", "tau2", str(run), str(tmp_path / "out.json")])
    _, err = capsys.readouterr()
    assert done.value.code == 2
    lines = [line for line in err.splitlines() if line.startswith("tolokaforge:")]
    assert len(lines) == 1 and "is not a τ² run" in lines[0]
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["export", "RUN", "OUT"], "missing option --format"),
        (["export", "--format", "csv", "RUN", "OUT"], "'csv' is not 'tau2'"),
        (["export", "--format", "tau2", "RUN"], "Missing argument 'OUT'"),
        (["export", "--format", "tau2", "NOWHERE", "OUT"], "does not exist"),
        (["export", "--format", "tau2", "EMPTY", "OUT"], "is not a results folder"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    names = {
        "RUN": str(tmp_path / "empty"),
        "EMPTY": str(tmp_path / "empty"),
        "OUT": str(tmp_path / "o.json"),
    }
    names["NOWHERE"] = str(tmp_path / "nowhere")
    with pytest.raises(SystemExit) as done:
        main([names.get(arg, arg) for arg in args])
    _, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("tolokaforge:")]
    assert done.value.code == 2 and len(lines) == 1 and says in lines[0], err
