"""Public task shapes, piece by piece: the scripted user's rules, pack discovery, inline workspace files,
adapter keys and run_config.yaml (the whole runs are in tests/compat/test_public_shapes.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tolokaforge.core.transcript import AssistantMessage, Message, UserMessage
from tolokaforge.host.errors import ConfigError, PackLoadError
from tolokaforge.host.packs import inspect_pack, load_pack
from tolokaforge.host.run.config_file import OPENROUTER_BASE_URL, read_run_config
from tolokaforge.host.users.scripted import ScriptedUser

# --- the scripted user: the public simulator's order of preference -------------------------------


async def _reply(flow: list[dict[str, Any]], messages: list[Message]) -> str:
    return (await ScriptedUser(flow).next_turn(messages, [])).content


async def test_a_rule_answers_the_assistant_case_insensitively_first_match_winning() -> None:
    flow = [
        {"if_assistant_contains": "booking CONFIRMED", "user": "Thank you!"},
        {"if_assistant_contains": "confirmed", "user": "never said"},
    ]
    said = await _reply(
        flow, [UserMessage("Book it"), AssistantMessage("Your booking confirmed for tomorrow.")]
    )
    assert said == "Thank you!"


async def test_the_default_answers_when_no_rule_matches_and_generic_answers_when_there_is_none() -> None:
    history: list[Message] = [UserMessage("Hi"), AssistantMessage("Something unexpected.")]
    assert await _reply([{"default": "I'm not sure."}], history) == "I'm not sure."
    rule = [{"if_assistant_contains": "never", "user": "x"}]
    assert await _reply(rule, history) == "Okay."
    assert (
        await _reply(rule, [UserMessage("Hi"), AssistantMessage("Shall I proceed?")])
        == "Yes, please proceed."
    )
    assert await _reply(rule, [UserMessage("Hi"), AssistantMessage("")]) == "I'm waiting for your response."


async def test_plain_turns_come_first_once_each_and_a_said_text_counts_as_said() -> None:
    flow = [{"user": "Hi"}, {"user": "My id is 7."}, {"default": "Go on."}]
    user = ScriptedUser(flow)
    history: list[Message] = [UserMessage("Hi"), AssistantMessage("Your id?")]
    first = await user.next_turn(history, [])
    assert first.content == "My id is 7."  # "Hi" was the task's first message already
    history += [UserMessage(first.content), AssistantMessage("Thanks.")]
    assert (await user.next_turn(history, [])).content == "Go on."


async def test_a_flow_without_rules_stops_once_said_and_a_rule_can_stop() -> None:
    history: list[Message] = [UserMessage("Hi"), AssistantMessage("Done.")]
    stopped = await ScriptedUser([{"user": "Hi"}]).next_turn(history, [])
    assert stopped.stop
    ruled = await ScriptedUser([{"if_assistant_contains": "done", "user": "Bye ###STOP###"}]).next_turn(
        history, []
    )
    assert ruled.stop and ruled.content == "Bye ###STOP###"


# --- packs: discovery, conditional turns, inline files, adapter keys -----------------------------


def _task(folder: Path, task_id: str, **extra: Any) -> Path:
    folder.mkdir(parents=True)
    task: dict[str, Any] = {
        "task_id": task_id,
        "initial_user_message": "Hi",
        "initial_state": {"json_db": {"rows": []}},
        "grading": {
            "combine": {"method": "weighted", "weights": {"transcript_rules": 1.0}, "pass_threshold": 1.0},
            "transcript_rules": {"must_contain": ["ok"]},
        },
        **extra,
    }
    (folder / "task.yaml").write_text(yaml.safe_dump(task))
    return folder


def _problems(pack: Path) -> dict[str, str]:
    return {problem.key: problem.message for problem in inspect_pack(pack).problems}


def test_tasks_are_found_below_any_folder_and_a_task_folder_is_a_pack_of_one(tmp_path: Path) -> None:
    _task(tmp_path / "pack" / "a" / "deep" / "one", "one")
    _task(tmp_path / "pack" / "two", "two")
    assert [t.task_id for t in load_pack(tmp_path / "pack").tasks] == ["one", "two"]
    single = load_pack(tmp_path / "pack" / "two")
    assert single.name == "two" and [t.task_id for t in single.tasks] == ["two"]
    only_deep = load_pack(tmp_path / "pack", tasks_glob="a/**/task.yaml")
    assert [t.task_id for t in only_deep.tasks] == ["one"]


def test_a_folder_without_task_files_says_what_it_looked_for(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(PackLoadError, match=r"holds no task file matching '\*\*/task.yaml'"):
        load_pack(tmp_path / "empty")


def test_conditional_turns_load_and_ambiguous_ones_are_refused(tmp_path: Path) -> None:
    flow = [
        {"if_assistant_contains": "colour", "user": "Blue"},
        {"default": "Go on."},
        {"if_assistant_contains": "", "user": "x"},
        {"default": "a", "user": "b"},
        {"if_assistant_contains": "x", "user": "a", "content": "b"},
    ]
    _task(tmp_path / "t", "t", user_simulator={"mode": "scripted", "scripted_flow": flow})
    problems = _problems(tmp_path / "t")
    assert "non-empty phrase" in problems["user_simulator.scripted_flow[2]"]
    assert "{default: text} alone" in problems["user_simulator.scripted_flow[3]"]
    assert "give the text once" in problems["user_simulator.scripted_flow[4]"]
    _task(tmp_path / "ok", "ok", user_simulator={"mode": "scripted", "scripted_flow": flow[:2]})
    simulator = load_pack(tmp_path / "ok").tasks[0].task.user_simulator
    assert simulator is not None
    assert simulator.scripted_flow == [
        {"if_assistant_contains": "colour", "user": "Blue"},
        {"default": "Go on."},
    ]


def test_inline_workspace_files_travel_in_the_task_bundle(tmp_path: Path) -> None:
    files = [{"path": "/env/fs/agent-visible/a/b.txt", "content": "B"}, {"path": "c.md", "content": "C"}]
    _task(tmp_path / "t", "t", initial_state={"workspace": {"files": files}})
    task = load_pack(tmp_path / "t").tasks[0].task
    seeds = task.initial_state.workspace_files
    assert set(seeds) == {"a/b.txt", "c.md"}
    assert task.tool_code is not None and task.tool_code.files is not None
    assert task.tool_code.files[seeds["a/b.txt"]] == "B"


def test_inline_workspace_paths_outside_the_workspace_or_twice_are_refused(tmp_path: Path) -> None:
    files = [
        {"path": "../escape.txt", "content": "x"},
        {"path": "same.txt", "content": "1"},
        {"path": "same.txt", "content": "2"},
    ]
    _task(tmp_path / "t", "t", initial_state={"workspace": {"files": files}})
    problems = _problems(tmp_path / "t")
    assert "must name a file in the workspace" in problems["initial_state.workspace.files[0].path"]
    assert "is given twice" in problems["initial_state.workspace.files[2].path"]


def test_native_adapter_keys_load_and_the_others_are_refused_with_where_to_go(tmp_path: Path) -> None:
    _task(tmp_path / "native", "native", adapter_type="native", adapter_settings={})
    assert len(load_pack(tmp_path / "native").tasks) == 1
    _task(tmp_path / "tau", "tau", adapter_type="tau", adapter_settings={"domain": "airline"})
    problems = _problems(tmp_path / "tau")
    assert "--pack tau2:<domain>" in problems["adapter_type"]
    assert "reads no settings" in problems["adapter_settings"]
    _task(tmp_path / "odd", "odd", adapter_type="mystery")
    assert "known: native, tau" in _problems(tmp_path / "odd")["adapter_type"]


# --- run_config.yaml ---------------------------------------------------------------------------


def _config(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "run_config.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _public(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "models": {
            "agent": {"provider": "openrouter", "name": "anthropic/claude-sonnet-4-6", "temperature": 0.0},
            "user": {"provider": "openrouter", "name": "anthropic/claude-sonnet-4-6", "temperature": 0.2},
        },
        "orchestrator": {"max_turns": 8, "queue_backend": "sqlite"},
        "evaluation": {"task_packs": ["packs/a"], "output_dir": "results/a"},
    }
    document.update(changes)
    return document


def test_a_public_run_config_maps_onto_run_settings_with_the_public_defaults(tmp_path: Path) -> None:
    plan = read_run_config(_config(tmp_path, _public()))
    assert (plan.trials, plan.concurrency, plan.max_turns, plan.max_attempts) == (5, 8, 8, 1)
    # openai/: OpenRouter is OpenAI-compatible, and the router's own anthropic/ name stays its model name.
    assert [m.name for m in plan.agent_models] == ["openai/anthropic/claude-sonnet-4-6"]
    assert plan.user_model is not None and plan.user_model.temperature == 0.2
    assert plan.base_url == OPENROUTER_BASE_URL
    assert plan.packs == (Path("packs/a"),) and plan.output == Path("results/a")
    assert plan.tasks_glob == "**/task.yaml"


def test_every_run_config_key_without_a_meaning_here_is_refused_by_its_path(tmp_path: Path) -> None:
    document = _public(
        orchestrator={
            "queue_backend": "postgres",
            "runtime": "docker",
            "timeouts": {"turn_s": 60},
            "max_requests_per_second": 2,
        },
        evaluation={
            "task_packs": ["p"],
            "output_dir": "o",
            "cache_images": True,
            "harness_adapter": {"type": "tau", "params": {"domain": "airline"}},
            "tasks_glob": "../**/task.yaml",
        },
    )
    document["models"]["agent"]["top_p"] = 0.5
    document["models"]["user"]["provider"] = "openai"
    document["models"]["judge"] = {"provider": "openai", "name": "j"}
    with pytest.raises(ConfigError) as raised:
        read_run_config(_config(tmp_path, document))
    message = str(raised.value)
    for path in (
        "orchestrator.queue_backend:",
        "orchestrator.runtime:",
        "orchestrator.timeouts:",
        "orchestrator.max_requests_per_second:",
        "evaluation.cache_images:",
        "evaluation.harness_adapter.type:",
        "evaluation.harness_adapter.params:",
        "evaluation.tasks_glob:",
        "models.agent.top_p:",
        "models.judge:",
        "models: one run talks to one OpenAI-compatible endpoint",
    ):
        assert path in message


def test_an_unknown_run_config_key_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"orchestrator\.wrokers"):
        read_run_config(_config(tmp_path, _public(orchestrator={"wrokers": 2})))
