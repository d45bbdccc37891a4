"""The Python API: ``evaluate`` from a plain script, ``aevaluate`` on a running event loop, with the golden
agent, a model behind a real local chat-completions server, and an agent object of the caller's."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from aiohttp import web

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.transcript import Message
from tolokaforge.host import AgentTurn, EvaluationResult, aevaluate, evaluate, load_pack
from tolokaforge.host.errors import ConfigError

if TYPE_CHECKING:
    from conftest import ChatServer, Replies, Responder

TWO_TASKS = ("lookup_order_tracking", "write_cancel_processing_order")

SCRIPT = """
import dataclasses, json, sys
from tolokaforge.host import evaluate

result = evaluate(sys.argv[1], "golden", tasks=sys.argv[3:], trials=2, output=sys.argv[2])
try:
    result.pass_rate = 0.0
except dataclasses.FrozenInstanceError:
    frozen = True
else:
    frozen = False
print(json.dumps({
    "frozen": frozen,
    "pack": result.pack,
    "agent": result.agent,
    "output": str(result.output),
    "pass_rate": result.pass_rate,
    "pass_hat_k": {str(k): v for k, v in result.pass_hat_k.items()},
    "pass_at_k": {str(k): v for k, v in result.pass_at_k.items()},
    "outcomes": dict(result.outcomes),
    "all_graded": result.all_graded,
    "trials": [
        [t.task_id, t.trial_index, t.passed, t.score, dict(t.components), list(t.reasons), t.termination]
        for t in result.trials
    ],
}))
"""


def test_evaluate_from_a_plain_script_returns_the_run_as_typed_values(
    packs_dir: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(packs_dir / "retail"), str(output), *TWO_TASKS],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["frozen"] is True
    assert (result["pack"], result["agent"], result["output"]) == ("retail", "golden", str(output))
    assert result["pass_rate"] == 1.0 and result["all_graded"] is True
    assert result["pass_hat_k"] == {"1": 1.0, "2": 1.0} and result["pass_at_k"] == {"1": 1.0, "2": 1.0}
    assert result["outcomes"]["passed"] == 4
    assert [(t[0], t[1]) for t in result["trials"]] == [(task, i) for task in TWO_TASKS for i in (0, 1)]
    for _, _, passed, score, components, reasons, termination in result["trials"]:
        assert passed is True and score == 1.0 and termination == "agent_done"
        assert components and all(value == 1.0 for value in components.values() if value is not None)
        assert "State: hash match" in reasons  # the grade's own reasons, a pass's included
    # The same files as `tolokaforge run` writes, and the same figures.
    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert summary["passed"] == 4 and summary["pass_rate"] == 1.0
    assert (output / "trials" / TWO_TASKS[1] / "1" / "grade.yaml").is_file()


async def test_aevaluate_runs_a_model_on_the_callers_loop_with_its_spend_and_reasons(
    packs_dir: Path,
    tmp_path: Path,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def answer(body: dict[str, Any], count: int) -> web.StreamResponse:
        return replies.completion(
            {"content": "Let me check that for you."}, prompt_tokens=90, completion_tokens=10
        )

    server = await chat_server(answer)
    monkeypatch.setenv("TOLOKAFORGE_LLM_API_KEY", "test-key")
    result = await aevaluate(
        packs_dir / "retail",
        "api-test-model",
        tasks=["write_cancel_processing_order"],
        base_url=server.url,
        output=tmp_path / "run",
        isolation="process",
        generation={"agent": {"temperature": 0.0, "seed": 7}},
    )
    assert isinstance(result, EvaluationResult)
    assert server.requests and all(body["model"] == "api-test-model" for body in server.requests)
    turns = [body for body in server.requests if body.get("tools")]  # the trial's, not the preflight's
    assert turns and all((body["temperature"], body["seed"]) == (0.0, 7) for body in turns)
    (trial,) = result.trials
    assert (trial.task_id, trial.trial_index, trial.outcome, trial.passed) == (
        "write_cancel_processing_order",
        0,
        "failed",
        False,
    )
    assert trial.score is not None and trial.score < 1.0 and trial.reasons  # the order was never cancelled
    grade = yaml.safe_load((tmp_path / "run" / "trials" / trial.task_id / "0" / "grade.yaml").read_text())
    assert list(trial.reasons) == grade["reasons"]
    assert trial.tokens == 100 * len(turns) and result.tokens == trial.tokens
    assert trial.cost_usd is None and result.cost_usd is None  # a model without a price
    assert result.pass_rate == 0.0 and result.pass_hat_k == {1: 0.0}
    manifest = yaml.safe_load((tmp_path / "run" / "run.yaml").read_text())
    assert manifest["models"]["agent"] == "api-test-model"


async def test_evaluate_inside_a_running_loop_points_at_aevaluate(packs_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"await aevaluate\(\.\.\.\)"):
        evaluate(packs_dir / "retail", output=tmp_path / "run")
    assert not (tmp_path / "run").exists()


class Apologiser:
    """An agent of the caller's own: it says one thing and ends the conversation."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> AgentTurn:
        self.seen.append(len(tools))
        return AgentTurn(content="Sorry, I cannot do that.", done=True)


async def test_an_agent_object_plays_every_trial_of_a_loaded_pack(packs_dir: Path, tmp_path: Path) -> None:
    agent = Apologiser()
    pack = load_pack(packs_dir / "retail")
    result = await aevaluate(pack, agent, tasks=TWO_TASKS, trials=2, output=tmp_path / "run")
    assert result.agent == "Apologiser" and len(agent.seen) == 4 and all(agent.seen)
    by_task = {t.task_id: t for t in result.trials if t.trial_index == 0}
    assert by_task["write_cancel_processing_order"].passed is False
    assert by_task["write_cancel_processing_order"].reasons
    assert all(t.termination == "agent_done" and t.tokens == 0 for t in result.trials)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.trials[0].passed = True  # pyright: ignore[reportAttributeAccessIssue]


@pytest.mark.parametrize(
    ("agent", "arguments", "message"),
    [
        ("llm", {}, "pass the model name itself"),
        (object(), {}, "agent must be 'golden', a model name"),
        ("golden", {"tasks": "lookup_order_tracking"}, "tasks must be a list of strings"),
        ("golden", {"tasks": ["no_such_task"]}, "no_such_task"),
        ("m", {"generation": {"agent": {"temperature": -1}}}, r"generation: 'agent.temperature=-1'.*>= 0"),
        ("m", {"generation": {"judge": {"seed": 1}}}, "generation: role.*'judge'"),
    ],
)
async def test_bad_arguments_are_config_errors_naming_the_argument(
    packs_dir: Path, tmp_path: Path, agent: Any, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        await aevaluate(packs_dir / "retail", agent, output=tmp_path / "run", **arguments)
    assert not (tmp_path / "run").exists()


DOC = Path(__file__).resolve().parents[3] / "docs" / "python-api.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)

CELLS = """
import ast, asyncio, inspect, json, sys

for number, source in enumerate(json.loads(open(sys.argv[1]).read()), 1):
    print(f"--- block {number}", flush=True)
    code = compile(source, f"python-api.md block {number}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace = {"__name__": "__main__"}
    if code.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(code, namespace))  # a notebook cell: its awaits run on a loop already running
    else:
        exec(code, namespace)
"""


async def test_the_python_api_page_runs_as_written(
    packs_dir: Path,
    tmp_path: Path,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
) -> None:
    """Every python block of docs/python-api.md, in order, each as its own script (a block with a
    top-level await as a notebook cell), from a folder holding the repository's examples/."""
    blocks = _BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 5 and sum("await " in block for block in blocks) == 1

    async def answer(body: dict[str, Any], count: int) -> web.StreamResponse:
        return replies.completion({"content": "Your order O-50064 has shipped."})

    server = await chat_server(answer)
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    (tmp_path / "examples").symlink_to(packs_dir.parent)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("TOLOKAFORGE_LLM_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    env |= {"OPENAI_BASE_URL": server.url, "TOLOKAFORGE_LLM_API_KEY": "test-key"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CELLS,
        str(tmp_path / "blocks.json"),
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=300)
    output = stdout.decode() + stderr.decode()
    assert process.returncode == 0, output
    assert "--- block 5" in output
    assert "pass rate 100%, pass^2 1.00" in output
    assert f"results written to runs{os.sep}retail-" in output
    turns = [body for body in server.requests if body.get("tools")]
    assert turns and all(body["model"] == "gpt-4o-mini" for body in server.requests)
    assert all((body["temperature"], body["seed"]) == (0.0, 1) for body in turns)
    assert "{'passed': 6," in output  # the refusal category's six tasks, from the notebook cell
    assert "OrderLookup passed 1" in output
    assert len(list((tmp_path / "runs").iterdir())) == 4  # each run its own folder
