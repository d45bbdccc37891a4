"""Benchmark: LLM-bound runs, trials/s against the ideal a model of fixed latency allows.

    uv run python tools/bench/llm_bound.py [--latency 0.5] [--turns 4] [--cases 512x128,1024x256]

A chat-completions server in another process (aiohttp, loopback) answers every request after
``--latency`` seconds: a scripted tool call for the first ``turns - 1`` assistant turns of a
conversation, then a final answer, after which the task's scripted user stops. The task is a tiny
synthetic pack written to a temporary folder (one read-only python tool, a small table, graded by
state hash), run with the llm agent through ``run_pack`` on the embedded runner (thread isolation),
result files included. Deterministic and offline.

Each trial then waits ``turns x latency`` for the model at best, so the ideal rate is
``concurrency / (turns x latency)``; the goal is at least 0.9 of it. Beside it: the event loop's lag
(how late a 10 ms ticker wakes, p50 / p99 / max during the run), the host process's CPU share and CPU
per trial, and the most requests the server saw at once (at most the concurrency; fewer means the host
held them back). The floor, measured just before each case: the same trials as bare HTTP loops (the
same model turns, no host, no runner), the rate the model server and the machine allow.

With ``--runners process`` the runner is ``tolokaforge-runner`` in another process, so the host's
process holds the host alone; ``embedded`` puts the runner on the host's own event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp import web
from runner_process import RunnerProcess, runner_process

from tolokaforge.core.collector import tune_collector
from tolokaforge.host import AgentRecipe, LLMOptions, RunSettings, llm_session, load_pack, run_pack

TASK_ID = "look_up"
TICK_S = 0.01

PACK_YAML = "name: llm-bound\nversion: 0.1.0\n"
TASK_YAML = textwrap.dedent(
    """
    task_id: look_up
    name: Look an item up
    initial_user_message: "What is item I-1?"
    system_prompt: "You look items up with the tools you have."
    max_turns: 64
    initial_state:
      json_db:
        items:
          - {id: I-1, name: lamp}
          - {id: I-2, name: chair}
    tools:
      agent:
        python: tools
      user:
        enabled: []
    user_simulator:
      mode: scripted
      scripted_flow: []
    grading: grading.yaml
    """
)
GRADING_YAML = textwrap.dedent(
    """
    combine:
      method: weighted
      weights: {state_checks: 1.0}
      pass_threshold: 1.0
    state_checks:
      hash:
        enabled: true
        golden_actions:
          - name: find_item
            kwargs: {item_id: I-1}
    """
)
TOOLS_PY = textwrap.dedent(
    """
    from __future__ import annotations

    import json
    from typing import Any


    class FindItem:
        @staticmethod
        def get_info() -> dict[str, Any]:
            properties = {"item_id": {"type": "string"}}
            return {
                "type": "function",
                "function": {
                    "name": "find_item",
                    "description": "Look an item up by its id.",
                    "parameters": {"type": "object", "properties": properties, "required": ["item_id"]},
                },
            }

        @staticmethod
        def invoke(data: dict[str, Any], item_id: str) -> str:
            return json.dumps(next(item for item in data["items"] if item["id"] == item_id))


    TOOLS = {"find_item": FindItem}
    """
)


def write_pack(root: Path) -> Path:
    task = root / "tasks" / TASK_ID
    task.mkdir(parents=True)
    (root / "pack.yaml").write_text(PACK_YAML)
    (task / "task.yaml").write_text(TASK_YAML)
    (task / "grading.yaml").write_text(GRADING_YAML)
    (task / "tools.py").write_text(TOOLS_PY)
    return root


# --- the model: a separate process, so its CPU is not the host's -------------------------------------


def _answer(step: int, turns: int) -> bytes:
    if step < turns - 1:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{step}",
                    "type": "function",
                    "function": {"name": "find_item", "arguments": '{"item_id": "I-1"}'},
                }
            ],
        }
    else:
        message = {"role": "assistant", "content": "Item I-1 is a lamp."}
    body = {
        "id": f"cmpl-{step}",
        "object": "chat.completion",
        "created": 0,
        "model": "bench-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }
    return json.dumps(body).encode()


async def serve_model(latency_s: float, turns: int) -> None:
    answers = [_answer(step, turns) for step in range(turns)]
    state = {"in_flight": 0, "peak": 0, "requests": 0}

    async def complete(request: web.Request) -> web.Response:
        state["in_flight"] += 1
        state["peak"] = max(state["peak"], state["in_flight"])
        state["requests"] += 1
        try:
            body = json.loads(await request.read())
            step = sum(1 for message in body["messages"] if message["role"] == "assistant")
            await asyncio.sleep(latency_s)
            return web.Response(body=answers[min(step, turns - 1)], content_type="application/json")
        finally:
            state["in_flight"] -= 1

    async def stats(request: web.Request) -> web.Response:
        reply = web.json_response(dict(state))
        state["peak"], state["requests"] = state["in_flight"], 0
        return reply

    app = web.Application()
    app.router.add_post("/v1/chat/completions", complete)
    app.router.add_get("/stats", stats)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    print(runner.addresses[0][1], flush=True)
    await asyncio.Event().wait()


@asynccontextmanager
async def model_process(latency_s: float, turns: int) -> AsyncGenerator[str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--serve",
        "--latency",
        str(latency_s),
        "--turns",
        str(turns),
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    port = int(await asyncio.wait_for(process.stdout.readline(), timeout=60))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        await process.wait()


# --- the host ---------------------------------------------------------------------------------------


async def _ticker(lags: list[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        started = loop.time()
        await asyncio.sleep(TICK_S)
        lags.append(loop.time() - started - TICK_S)


async def bare_rate(server: str, trials: int, concurrency: int, turns: int) -> float:
    """The floor: the same model turns from bare HTTP loops, no host: what the model and machine allow."""
    gate = asyncio.Semaphore(concurrency)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is item I-1?"}]

    async with llm_session(concurrency) as session:

        async def trial() -> None:
            async with gate:
                for step in range(turns):
                    body = {"model": "bench-model", "messages": messages + [{"role": "assistant"}] * step}
                    async with session.post(server + "/v1/chat/completions", json=body) as response:
                        await response.read()

        started = time.perf_counter()
        await asyncio.gather(*(trial() for _ in range(trials)))
        return trials / (time.perf_counter() - started)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


@asynccontextmanager
async def threaded_runner() -> AsyncGenerator[RunnerProcess]:
    """``tolokaforge-runner`` in another process (thread isolation), so the host's process is the host alone."""
    async with runner_process("--isolation", "thread") as runner:
        yield runner


async def run_case(
    pack_root: Path, server: str, trials: int, concurrency: int, scratch: Path, runner: RunnerProcess | None
) -> dict[str, Any]:
    pack = load_pack(pack_root)
    recipe = AgentRecipe.of("llm", LLMOptions("bench-model", None, server + "/v1", None), None, False)
    async with llm_session(concurrency) as session:
        agents, users = recipe.build(session)
        async with session.get(server + "/stats") as response:  # resets the server's peak
            await response.read()
        lags: list[float] = []
        stop = asyncio.Event()
        ticker = asyncio.create_task(_ticker(lags, stop))
        cpu, started = time.process_time(), time.perf_counter()
        summary = await run_pack(
            pack,
            agents,
            users,
            RunSettings(
                output=Path(tempfile.mkdtemp(prefix="run-", dir=scratch)),
                trials=trials,
                concurrency=concurrency,
                runner=None if runner is None else runner.address,
                runner_token_file=None if runner is None else runner.token_file,
                isolation="thread",
            ),
        )
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        stop.set()
        await ticker
        async with session.get(server + "/stats") as response:
            seen: dict[str, Any] = await response.json()
    return {
        "rate": summary.ran / elapsed,
        "pass": summary.pass_rate,
        "cpu": cpu / elapsed,
        "cpu_ms": cpu * 1e3 / summary.ran,
        "lag_p50": statistics.median(lags) * 1e3,
        "lag_p99": _quantile(lags, 0.99) * 1e3,
        "lag_max": max(lags) * 1e3,
        "peak": seen["peak"],
        "requests": seen["requests"],
    }


async def main(args: argparse.Namespace) -> None:
    os.environ.setdefault("TOLOKAFORGE_LLM_API_KEY", "bench")  # the local model checks no key
    cases = [tuple(int(part) for part in case.split("x")) for case in args.cases.split(",")]
    tune_collector()  # as `tolokaforge run` does (the floors run under the same settings)
    print(
        f"llm agent, {args.turns} model turns per trial ({args.turns - 1} tool calls), "
        f"model latency {args.latency:g}s, runner with thread isolation"
    )
    print(
        f"{'runner':<10}{'trials':>7}{'conc':>6}{'trials/s':>10}{'ideal':>8}{'ratio':>7}{'bare/s':>8}{'pass':>6}"
        f"{'lag p50/p99/max ms':>22}{'host CPU':>10}{'CPU ms/trial':>14}{'peak reqs':>11}"
    )
    with tempfile.TemporaryDirectory(prefix="tf-llm-bound-") as tmp:
        pack_root = write_pack(Path(tmp) / "pack")
        async with model_process(args.latency, args.turns) as server:
            for mode in args.runners.split(","):
                async with contextlib.AsyncExitStack() as stack:
                    runner = await stack.enter_async_context(threaded_runner()) if mode == "process" else None
                    await run_case(pack_root, server, 8, 8, Path(tmp), runner)  # warm-up: imports, tools
                    for trials, concurrency in cases:
                        bare = await bare_rate(server, trials, concurrency, args.turns)
                        result = await run_case(pack_root, server, trials, concurrency, Path(tmp), runner)
                        ideal = concurrency / (args.turns * args.latency)
                        lag = f"{result['lag_p50']:.1f}/{result['lag_p99']:.1f}/{result['lag_max']:.1f}"
                        print(
                            f"{mode:<10}{trials:>7}{concurrency:>6}{result['rate']:>10.1f}{ideal:>8.1f}"
                            f"{result['rate'] / ideal:>7.2f}{bare:>8.1f}{result['pass']:>6.2f}{lag:>22}"
                            f"{result['cpu']:>9.0%}{result['cpu_ms']:>14.1f}{result['peak']:>11}",
                            flush=True,
                        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the model takes per answer")
    parser.add_argument("--turns", type=int, default=4, help="model turns per trial (the last one answers)")
    parser.add_argument("--cases", default="512x128,1024x256", help="TRIALSxCONCURRENCY, comma-separated")
    parser.add_argument(
        "--runners", default="embedded,process", help="embedded (in the host's process) and/or process"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve:
        asyncio.run(serve_model(arguments.latency, arguments.turns))
    else:
        asyncio.run(main(arguments))
