"""Benchmark: grading τ² golden trajectories here vs. τ²'s own evaluator, and golden trials/s per domain.

    uv run python tools/bench/tau2_grade.py [--domains airline,retail,telecom] [--isolation sandbox]
        [--limit N] [--concurrency 16]

Per domain (τ²'s base split) and task, on one embedded runner: register the trial, make τ²'s golden
calls through the runner (each side's calls on its side), then time GradeTrial (the trial's grade with
every component of its reward basis). In the same round, the same trajectory (the runner's own
outputs, the greeting, the communicate strings said at the end) goes to τ²'s
``evaluate_simulation(..., EvaluationType.ALL, ...)``, timed the same way; the two rewards must agree.
It prints, per domain, the median and p90 ms per task of each, the ratio (goal: ours >= 20x faster),
and how many rewards disagreed (must be 0).

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

from tolokaforge.host import (
    GoldenAgentFactory,
    Pack,
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


async def grade_round(domain: str, pack: Pack, isolation: Isolation, tau2: _Tau2) -> tuple[list[float], ...]:
    ours: list[float] = []
    theirs: list[float] = []
    disagreements = 0
    async with open_runner(None, isolation=isolation) as client:
        for index, loaded in enumerate(pack.tasks):
            task = loaded.task
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
                    spec.trial_id,
                    call_id=call_id,
                    tool_name=action.tool_name,
                    arguments_json=arguments,
                    executor=action.executor,
                )
                content = answer.output if answer.status == 1 else "Error: " + answer.error_message
                call = {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": action.tool_name, "arguments": arguments},
                }
                role = "assistant" if action.executor == "agent" else "user"
                ours_messages.append({"role": role, "content": None, "tool_calls": [call]})
                ours_messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
                requestor = "assistant" if action.executor == "agent" else "user"
                tool_call = m.ToolCall(
                    id=call_id, name=action.tool_name, arguments=action.arguments, requestor=requestor
                )
                holder = m.AssistantMessage if requestor == "assistant" else m.UserMessage
                theirs_messages.append(holder(role=role, content=None, tool_calls=[tool_call]))
                theirs_messages.append(
                    m.ToolMessage(
                        id=call_id,
                        role="tool",
                        content=content,
                        requestor=requestor,
                        error=answer.status != 1,
                    )
                )
            final = (task.golden_response or "Done.") + " ###STOP###"
            ours_messages.append({"role": "assistant", "content": final})
            theirs_messages.append(m.AssistantMessage(role="assistant", content=final))
            started = time.perf_counter()
            graded = await client.grade(spec.trial_id, json.dumps(ours_messages), "agent_done", release=True)
            ours.append(time.perf_counter() - started)
            if not graded.released:
                await client.cleanup(spec.trial_id)
            reference = tau2_task(f"tau2:{domain}", task.task_id)
            simulation = tau2.run(reference, theirs_messages)
            started = time.perf_counter()
            reward = tau2.evaluate(simulation, reference, tau2.all, False, domain).reward
            theirs.append(time.perf_counter() - started)
            score = graded.grade.score if graded.success and graded.grade is not None else None
            if score is None or abs(score - reward) > 1e-9:
                disagreements += 1
    return ours, theirs, [float(disagreements)]


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
    print(
        f"{'domain':8} {'tasks':>5} {'here ms p50 / p90':>20} {'τ² ms p50 / p90':>20} {'ratio':>7} {'differ':>6}"
    )
    packs: dict[str, Pack] = {}
    for domain in args.domains.split(","):
        pack = load_pack(Path(f"tau2:{domain}"))
        if args.limit:
            pack = Pack(
                pack.root, pack.name, pack.version, pack.tasks[: args.limit], pack.tool_code, pack.requires
            )
        packs[domain] = pack
        ours, theirs, differ = await grade_round(domain, pack, args.isolation, tau2)
        ratio = statistics.median(theirs) / statistics.median(ours)
        print(f"{domain:8} {len(ours):5} {_ms(ours):>20} {_ms(theirs):>20} {ratio:6.1f}x {int(differ[0]):6}")
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
