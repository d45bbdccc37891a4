"""Benchmark: grading τ² golden trajectories here vs. τ²'s own evaluator, and golden trials/s per domain.

    uv run python tools/bench/tau2_grade.py [--domains airline,retail,telecom] [--isolation sandbox]
        [--limit N] [--concurrency 16]

Per domain (τ²'s base split) and task, on one embedded runner: register a trial, make τ²'s golden
calls through the runner (each side's calls on its side), then time GradeTrial (the trial's grade with
every component of its reward basis) -- for the task's first trial (its golden path replayed) and for its
third (the runner reuses a task's replay once two agreed, as for every later trial of a run). In the same round, the same trajectory (the runner's own
outputs, the greeting, the communicate strings said at the end) goes to τ²'s
``evaluate_simulation(..., EvaluationType.ALL, ...)``, timed the same way; the two rewards must agree.
It prints, per domain, the median and p90 ms per task of each, the ratios (goal: ours >= 20x faster),
and how many tasks' rewards disagreed with τ²'s on any trial (must be 0).

Then golden trials/s per domain: ``run_pack`` with the golden agent over the domain's tasks (what
``tolokaforge run --pack tau2:<domain>`` does), beside the same figure for the example retail pack,
measured in the same run with the same settings.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from tolokaforge.core.models import TaskDescription
from tolokaforge.core.runner_api import GradeRequest, GradingFailedError, ToolCallRequest
from tolokaforge.core.termination import TerminationReason
from tolokaforge.core.transcript import decode_transcript_wire
from tolokaforge.host import (
    GoldenAgentFactory,
    Pack,
    Runner,
    RunSettings,
    UserRouter,
    build_trial_spec,
    load_pack,
    open_runner,
    run_pack,
    tau2_task,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
RETAIL_PACK = Path(__file__).resolve().parents[2] / "examples" / "packs" / "retail"
GREETING = "Hi! How can I help you today?"
USER_LINE = "I need help."
Isolation = Literal["sandbox", "process", "thread"]


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"{statistics.median(ordered) * 1000:8.2f} / {p90 * 1000:8.2f}"


class _Tau2:
    """τ²'s evaluator and message classes (imported once: τ²'s registry loads litellm)."""

    def __init__(self) -> None:
        from loguru import logger

        logger.disable("tau2")  # τ²'s registry logs its whole content at import
        evaluator: Any = importlib.import_module("tau2.evaluator.evaluator")
        self.message: Any = importlib.import_module("tau2.data_model.message")
        self.simulation: Any = importlib.import_module("tau2.data_model.simulation")
        self.all = evaluator.EvaluationType.ALL
        self.evaluate = evaluator.evaluate_simulation

    def run(self, task: Any, messages: list[Any]) -> Any:
        return self.simulation.SimulationRun(
            id="bench",
            task_id=task.id,
            start_time="",
            end_time="",
            duration=0.0,
            termination_reason=self.simulation.TerminationReason.AGENT_STOP,
            messages=messages,
        )


ROUNDS = 3
"""Trials per task: the 1st replays the golden path; from the 3rd the runner reuses the task's replay
(two replays agreed: docs/grading.md), as every later trial of a run with --trials > 2 does."""


async def _trial(
    client: Runner, task: TaskDescription, index: int, tau2: _Tau2
) -> tuple[float, float | None, list[Any]]:
    """One golden trial: (GradeTrial seconds, our score, the same trajectory as τ²'s messages)."""
    spec = build_trial_spec(task, run_id="bench", trial_index=index)
    await client.register(spec)
    state_checks = task.grading.state_checks
    golden = state_checks.golden_actions if state_checks is not None else []
    ours_messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": GREETING},
        {"role": "user", "content": USER_LINE},
    ]
    m = tau2.message
    theirs_messages: list[Any] = [
        m.AssistantMessage(role="assistant", content=GREETING),
        m.UserMessage(role="user", content=USER_LINE),
    ]
    for number, action in enumerate(golden):
        call_id = f"g{number}"
        arguments = json.dumps(action.arguments)
        answer = await client.execute(
            ToolCallRequest(spec.trial_id, call_id, action.tool_name, arguments, action.executor)
        )
        failure = answer.failure
        content = answer.output if failure is None else "Error: " + failure.message
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": action.tool_name, "arguments": arguments},
        }
        role = "assistant" if action.executor == "agent" else "user"
        ours_messages.append({"role": role, "content": None, "tool_calls": [call]})
        ours_messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
        tool_call = m.ToolCall(id=call_id, name=action.tool_name, arguments=action.arguments, requestor=role)
        holder = m.AssistantMessage if role == "assistant" else m.UserMessage
        theirs_messages.append(holder(role=role, content=None, tool_calls=[tool_call]))
        theirs_messages.append(
            m.ToolMessage(id=call_id, role="tool", content=content, requestor=role, error=failure is not None)
        )
    final = (task.golden_response or "Done.") + " ###STOP###"
    ours_messages.append({"role": "assistant", "content": final})
    theirs_messages.append(m.AssistantMessage(role="assistant", content=final))
    started = time.perf_counter()
    request = GradeRequest(
        spec.trial_id,
        decode_transcript_wire(json.dumps(ours_messages)),
        TerminationReason.AGENT_DONE,
        release=True,
    )
    try:
        graded = await client.grade(request)
    except GradingFailedError:
        graded = None
    seconds = time.perf_counter() - started
    if graded is None or not graded.released:
        await client.release(spec.trial_id)
    score = graded.grade.score if graded is not None else None
    return seconds, score, theirs_messages


async def grade_round(domain: str, pack: Pack, isolation: Isolation, tau2: _Tau2) -> dict[str, list[float]]:
    """Per task: GradeTrial of its 1st and of its 3rd trial, τ²'s evaluator on the 1st trajectory."""
    figures: dict[str, list[float]] = {"first": [], "memo": [], "tau2": [], "differ": [0.0]}
    async with open_runner(None, isolation=isolation) as client:
        for loaded in pack.tasks:
            task = loaded.task
            scores: list[float | None] = []
            reward = -1.0
            for round_ in range(ROUNDS):
                seconds, score, messages = await _trial(client, task, round_, tau2)
                scores.append(score)
                if round_ == 0:
                    figures["first"].append(seconds)
                    reference = tau2_task(f"tau2:{domain}", task.task_id)
                    simulation = tau2.run(reference, messages)
                    started = time.perf_counter()
                    reward = tau2.evaluate(simulation, reference, tau2.all, False, domain).reward
                    figures["tau2"].append(time.perf_counter() - started)
                elif round_ == ROUNDS - 1:
                    figures["memo"].append(seconds)
            if any(score is None or abs(score - reward) > 1e-9 for score in scores):
                figures["differ"][0] += 1
    return figures


async def trials_per_second(pack: Pack, isolation: Isolation, concurrency: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        await run_pack(
            pack,
            GoldenAgentFactory(),
            UserRouter(stand_in=True),
            RunSettings(output=Path(folder) / "run", concurrency=concurrency, isolation=isolation),
        )
        return len(pack.tasks) / (time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--domains", default="airline,retail,telecom")
    parser.add_argument("--isolation", choices=["sandbox", "process", "thread"], default="sandbox")
    parser.add_argument("--limit", type=int, default=0, help="At most this many tasks per domain (0: all).")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    tau2 = _Tau2()
    print(f"isolation {args.isolation}; GradeTrial here vs τ²'s evaluate_simulation, per golden task")
    print("  1st: a task's first trial (golden replay); 3rd: its third (the task's replay reused)")
    print(
        f"{'domain':8} {'tasks':>5} {'1st ms p50 / p90':>20} {'3rd ms p50 / p90':>20} {'τ² ms p50 / p90':>20}"
        f" {'1st':>6} {'3rd':>6} {'differ':>6}"
    )
    packs: dict[str, Pack] = {}
    for domain in args.domains.split(","):
        pack = load_pack(Path(f"tau2:{domain}"))
        if args.limit:
            pack = Pack(
                pack.root, pack.name, pack.version, pack.tasks[: args.limit], pack.tool_code, pack.requires
            )
        packs[domain] = pack
        got = await grade_round(domain, pack, args.isolation, tau2)
        theirs = statistics.median(got["tau2"])
        first, memo = theirs / statistics.median(got["first"]), theirs / statistics.median(got["memo"])
        print(
            f"{domain:8} {len(got['first']):5} {_ms(got['first']):>20} {_ms(got['memo']):>20} {_ms(got['tau2']):>20}"
            f" {first:5.1f}x {memo:5.1f}x {int(got['differ'][0]):6}"
        )
    print(f"\ngolden trials/s, concurrency {args.concurrency} (goal for grading: ratio >= 20x)")
    retail = load_pack(RETAIL_PACK)
    print(
        f"{'examples/packs/retail':24} {await trials_per_second(retail, args.isolation, args.concurrency):8.1f}"
    )
    for domain, pack in packs.items():
        rate = await trials_per_second(pack, args.isolation, args.concurrency)
        print(f"{'tau2:' + domain:24} {rate:8.1f}")


if __name__ == "__main__":
    asyncio.run(main())
