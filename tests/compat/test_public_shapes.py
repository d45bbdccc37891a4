"""The public_shapes proof pack: the public task shapes, pack discovery and a multi-pack run config.

The pack is written in the public layout (a folder of task folders, no ``tasks/``, no pack.yaml):
``inline_note`` seeds its workspace from files written inline in task.yaml and names the native
adapter; ``rules_chat`` has a scripted user that answers by rules. Everything goes through the real CLI
and the embedded runner (pack code in the OS sandbox); the LLM runs talk to a real HTTP server on
loopback that plays two chat models, one right and one wrong.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

if TYPE_CHECKING:
    from conftest import Cli

PACK = Path(__file__).parent / "packs" / "public_shapes"


def _trial(run: Path, task_id: str, name: str) -> dict[str, Any]:
    return yaml.safe_load((run / "trials" / task_id / "0" / name).read_text())


def _said(run: Path, task_id: str, role: str) -> list[str]:
    messages = _trial(run, task_id, "trajectory.yaml")["messages"]
    return [str(message["content"]) for message in messages if message["role"] == role]


def _scripted(tmp_path: Path, turns: list[dict[str, Any]], pack: Path, cli: Cli) -> Path:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(turns))
    run = tmp_path / "run"
    code, out = cli(
        ["run", "--pack", str(pack), "--agent", "scripted", "--script", str(script), "--output", str(run)]
    )
    assert code == 0, out  # every trial graded
    return run


# --- discovery -----------------------------------------------------------------------------------


def test_a_folder_of_task_folders_and_a_single_task_folder_are_packs(
    cli: Cli,
) -> None:
    code, out = cli(["validate", "--pack", str(PACK)])
    assert code == 0, out
    assert "public_shapes: 2 tasks" in out
    code, out = cli(["validate", "--pack", str(PACK / "rules_chat")])
    assert code == 0, out
    assert "rules_chat: 1 tasks" in out


def test_two_tasks_with_one_task_id_are_still_an_error(tmp_path: Path, cli: Cli) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(PACK, pack)
    shutil.copytree(pack / "rules_chat", pack / "nested" / "again")
    code, out = cli(["validate", "--pack", str(pack)])
    assert code == 1
    assert "task.yaml: task_id: 'rules_chat' is also the task_id of" in out
    assert "nested/again/task.yaml" in out


# --- golden and planted mistakes -----------------------------------------------------------------


def test_golden_run_passes_every_task(tmp_path: Path, cli: Cli) -> None:
    run = tmp_path / "run"
    code, out = cli(["run", "--pack", str(PACK), "--agent", "golden", "--output", str(run)])
    assert code == 0, out
    summary = yaml.safe_load((run / "summary.yaml").read_text())
    assert summary["passed"] == 2, out
    # The inline file was in the workspace before the agent's first call.
    assert "milk\neggs\n" in _said(run, "inline_note", "tool")[0]


def test_inline_workspace_files_seed_the_workspace_and_a_wrong_copy_fails_naming_the_check(
    tmp_path: Path, cli: Cli
) -> None:
    turns = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "/env/fs/agent-visible/README.md"}}]},
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "notes/done.txt", "content": "milk\n"}}
            ]
        },
        {"content": "Copied.", "done": True},
    ]
    run = _scripted(tmp_path, turns, PACK / "inline_note", cli)
    assert _said(run, "inline_note", "tool")[0] == "Notes live under notes/.\n"
    grade = _trial(run, "inline_note", "grade.yaml")
    assert grade["binary_pass"] is False
    assert "the copy lists eggs" in str(grade["reasons"])


def test_rules_answer_the_assistant_and_the_default_answers_the_rest(tmp_path: Path, cli: Cli) -> None:
    turns = [
        {"content": "What size of tin?"},
        {"content": "Which colour would you like?"},
        {"content": "Blue paint is noted."},
    ]
    run = _scripted(tmp_path, turns, PACK / "rules_chat", cli)
    users = _said(run, "rules_chat", "user")
    assert users[1:] == ["Sorry, what do you need from me?", "Blue, please.", "Great, thank you. ###STOP###"]
    assert _trial(run, "rules_chat", "grade.yaml")["binary_pass"] is True


def test_a_conversation_without_the_confirmation_fails_naming_the_rule(tmp_path: Path, cli: Cli) -> None:
    turns = [{"content": "Which colour would you like?"}, {"content": "Red paint is noted."}]
    run = _scripted(tmp_path, turns, PACK / "rules_chat", cli)
    grade = _trial(run, "rules_chat", "grade.yaml")
    assert grade["binary_pass"] is False
    assert "Blue paint is noted" in str(grade["reasons"])


def test_an_adapter_this_loader_is_not_is_refused_by_key(tmp_path: Path, cli: Cli) -> None:
    task = tmp_path / "inline_note"
    shutil.copytree(PACK / "inline_note", task)
    text = (task / "task.yaml").read_text()
    text = text.replace("adapter_type: native", "adapter_type: terminal_bench")
    text = text.replace("adapter_settings: {}", "adapter_settings: {domain_dir: ../_domain}")
    (task / "task.yaml").write_text(text)
    code, out = cli(["validate", "--pack", str(task)])
    assert code == 1
    assert "task.yaml: adapter_type: 'terminal_bench' is not loaded here (only native is)" in out
    assert "task.yaml: adapter_settings: the native adapter reads no settings" in out


# --- run_config.yaml: two packs x two models, one run --------------------------------------------


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    """What the fake endpoint's two models say: ``good-model`` does each task, ``bad-model`` does not."""
    good = body["model"] == "good-model"
    messages: list[dict[str, Any]] = body["messages"]
    turns = sum(1 for message in messages if message["role"] == "assistant")
    if "notes" in str(messages[0]["content"]):
        if good and turns == 0:
            return _call("read_file", {"path": "notes/todo.txt"})
        if good and turns == 1:
            return _call("write_file", {"path": "notes/done.txt", "content": messages[-1]["content"]})
        if not good and turns == 0:
            return _call("write_file", {"path": "notes/done.txt", "content": "milk\n"})
        return {"content": "Done."}
    if turns == 0:
        return {"content": "Which colour would you like?" if good else "What size of tin?"}
    return {"content": "Blue paint is noted." if good else "Some paint is noted."}


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {
        "id": f"call-{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return {"content": None, "tool_calls": [call]}


class _Endpoint(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # the run's one-token preflight, then the trials' turns
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        message = {"role": "assistant", **_reply(body)}
        self._send(
            {
                "id": "cmpl",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            }
        )

    def _send(self, document: dict[str, Any]) -> None:
        data = json.dumps(document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("TOLOKAFORGE_LLM_API_KEY", "test-key")
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _config(tmp_path: Path, **orchestrator: Any) -> Path:
    config = {
        "models": {
            "agent": [
                {"provider": "openai", "name": "good-model", "temperature": 0.0},
                {"provider": "openai", "name": "bad-model"},
            ]
        },
        "orchestrator": {
            "workers": 2,
            "repeats": 1,
            "max_turns": 8,
            "queue_backend": "sqlite",
            **orchestrator,
        },
        "evaluation": {
            "task_packs": [str(PACK / "inline_note"), str(PACK / "rules_chat")],
            "tasks_glob": "**/task.yaml",
            "output_dir": str(tmp_path / "results"),
        },
    }
    path = tmp_path / "run_config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_run_config_runs_packs_by_models_as_one_comparable_run(
    tmp_path: Path, endpoint: str, cli: Cli
) -> None:
    config = _config(tmp_path)
    code, out = cli(["run", "--config", str(config), "--llm-base-url", endpoint])
    assert code == 0, out
    assert "per pack x model" in out
    run = tmp_path / "results"
    manifest = yaml.safe_load((run / "run.yaml").read_text())
    assert manifest["tasks"] == [
        "inline_note.good-model.inline_note",
        "inline_note.bad-model.inline_note",
        "rules_chat.good-model.rules_chat",
        "rules_chat.bad-model.rules_chat",
    ]
    assert manifest["options"]["cells"]["rules_chat.bad-model.rules_chat"] == {
        "pack": "rules_chat",
        "model": "bad-model",
        "task_id": "rules_chat",
    }
    summary = yaml.safe_load((run / "summary.yaml").read_text())
    rows = {(row["pack"], row["model"]): row["pass_rate"] for row in summary["per_pack_model"]}
    assert rows == {
        ("inline_note", "good-model"): 1.0,
        ("inline_note", "bad-model"): 0.0,
        ("rules_chat", "good-model"): 1.0,
        ("rules_chat", "bad-model"): 0.0,
    }
    bad = _trial(run, "rules_chat.bad-model.rules_chat", "grade.yaml")
    assert "Blue paint is noted" in str(bad["reasons"])
    code, out = cli(["run", "--config", str(config), "--llm-base-url", endpoint, "--resume"])
    assert code == 0, out  # the same run: nothing left to do
    assert yaml.safe_load((run / "summary.yaml").read_text())["skipped_by_resume"] == 4
    code, out = cli(["report", str(run)])
    assert code == 0, out
    page = (run / "report.html").read_text()
    assert "Packs \u00d7 models" in page
    assert page.index("good-model") < page.index("bad-model")


def test_run_config_keys_without_a_meaning_here_are_refused_by_path(tmp_path: Path, cli: Cli) -> None:
    config = _config(tmp_path, queue_backend="postgres", max_budget_usd=5)
    raw = yaml.safe_load(config.read_text())
    raw["models"]["agent"][0]["provider"] = "google"
    config.write_text(yaml.safe_dump(raw))
    code, out = cli(["run", "--config", str(config)])
    assert code == 2
    assert "orchestrator.queue_backend: 'postgres' is not supported" in out
    assert "orchestrator.max_budget_usd: not supported" in out
    assert "models.agent[0].provider: 'google' is not supported" in out
    code, out = cli(["run", "--config", str(_config(tmp_path)), "--trials", "3"])
    assert code == 2
    assert "--trials (the config's orchestrator.repeats)" in out
