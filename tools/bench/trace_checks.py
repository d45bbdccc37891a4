"""Benchmark: GradeTrial with a trace-check block, beside GradeTrial over the same timeline without one.

    uv run python tools/bench/trace_checks.py [--calls 100,1000] [--values 50] [--repeat 7]

One runner on 127.0.0.1, two trials with the same N tool calls (alternating a trivial `ping` and a
one-record `touch`) and the same transcript. The floor trial grades one transcript rule, so its
GradeTrial is the decode + timeline join + one walk every grading pays; the measured trial grades ten
constraints, one of each kind, plus a bound constraint over `--values` distinct values (a binding
re-evaluates its tree once per value). Printed: median ms per GradeTrial for each, and the difference
per event. Medians of --repeat runs; the machines are noisy, compare ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from runner_calls import PARAMS, TOOLS  # the benchmarks' shared ping/touch tools

from tolokaforge.contracts.runner import (
    ExecuteToolRequest,
    ExecutionStatus,
    GradeTrialRequest,
    RegisterTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerSettings, start_runner


def _m(tool: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "tool_call", "tool": {"equals": tool}, **extra}


def _c(ident: str, require: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": ident, "description": ident, "require": require, **extra}


def trace_block() -> dict[str, Any]:
    ping, touch = _m("ping"), _m("touch")
    odd = _m("touch", args={"index": {"gt": 10**9}})
    return {
        "constraints": [
            _c("present", {"present": {"match": ping}}),
            _c("absent", {"absent": {"match": odd}}),
            _c("count", {"count": {"match": ping, "min": 1}}),
            _c("before", {"before": {"left": {"quantifier": "first", "match": ping},
                                     "right": {"quantifier": "last", "match": touch}}}),
            _c("adjacent", {"immediately_before": {"among": "tool_calls",
                                                   "left": {"quantifier": "any", "match": ping},
                                                   "right": {"quantifier": "any", "match": touch}}}),
            _c("absent_before", {"absent_before": {"forbidden": odd,
                                                   "anchor": {"quantifier": "first", "match": ping}}}),
            _c("absent_between", {"absent_between": {"forbidden": odd,
                                                     "start": {"quantifier": "first", "match": ping},
                                                     "end": {"quantifier": "last", "match": touch}}}),
            _c("all_of", {"all_of": [{"present": {"match": ping}}, {"present": {"match": touch}}]}),
            _c("any_of", {"any_of": [{"absent": {"match": ping}}, {"present": {"match": touch}}]}),
            _c("negate", {"negate": {"present": {"match": odd}}}),
            _c(
                "bound",
                {"present": {"match": _m("touch", args={"index": {"equals_binding": "idx"}},
                                         status={"equals": "success"})}},
                bind={"match": touch, "values": {"idx": {"field": "args.index"}}},
            ),
        ]
    }  # fmt: skip


def _spec(trial_id: str, code: Path, grading: dict[str, Any], records: int) -> str:
    tools = [
        {"name": name.lower(), "parameters": params, "source": {"module_path": "tools", "class_name": name}}
        for name, params in PARAMS.items()
    ]
    table = [{"id": f"R-{i}", "value": i} for i in range(records)]
    task = {
        "task_id": "bench",
        "agent_tools": tools,
        "tool_code": {"path": str(code)},
        "initial_state": {"tables": {"records": table}},
        "grading": grading,
    }
    return json.dumps({"trial_id": trial_id, "task": task})


async def _trial(
    stub: RunnerServiceStub, trial_id: str, code: Path, grading: dict[str, Any], calls: int, values: int
) -> str:
    response = await stub.register_trial(
        RegisterTrialRequest(
            trial_id=trial_id,
            trial_spec_json=_spec(trial_id, code, grading, values),
            engine_protocol_version=ENGINE_PROTOCOL_VERSION,
        )
    )
    assert response.success, response.error
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for n in range(calls):
        tool, arguments = ("ping", {"text": "hi"}) if n % 2 == 0 else ("touch", {"index": n % values})
        call_id = f"c{n}"
        result = await stub.execute_tool(
            ExecuteToolRequest(
                trial_id=trial_id,
                tool_name=tool,
                arguments_json=json.dumps(arguments),
                executor="agent",
                call_id=call_id,
            )
        )
        assert result.status == ExecutionStatus.SUCCESS, result.error_message
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": call_id, "function": {"name": tool, "arguments": json.dumps(arguments)}}
                ],
            }
        )
        messages.append({"role": "tool", "content": result.output, "tool_call_id": call_id})
    messages.append({"role": "assistant", "content": "done"})
    return json.dumps(messages)


async def _grade_ms(stub: RunnerServiceStub, trial_id: str, transcript: str, repeat: int) -> float:
    samples: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = await stub.grade_trial(
            GradeTrialRequest(
                trial_id=trial_id, llm_messages_json=transcript, termination_reason="agent_done"
            )
        )
        samples.append(time.perf_counter() - started)
        assert response.success, response.error
    return statistics.median(samples) * 1e3


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", default="100,1000")
    parser.add_argument("--values", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        code = Path(scratch)
        (code / "tools.py").write_text(TOOLS)
        handle = await start_runner(RunnerSettings())
        channel = handle.channel()
        stub = RunnerServiceStub(channel)
        base = {"combine_method": "weighted", "pass_threshold": 1.0}
        try:
            print(f"{'events':>8} {'trace GradeTrial ms':>20} {'floor ms':>10} {'extra us/event':>15}")
            for calls in (int(c) for c in args.calls.split(",")):
                traced = {**base, "weights": {"trace_checks": 1.0}, "trace_checks": trace_block()}
                floor = {
                    **base,
                    "weights": {"transcript_rules": 1.0},
                    "transcript_rules": {"must_contain": ["done"]},
                }
                t_transcript = await _trial(stub, f"trace:{calls}", code, traced, calls, args.values)
                f_transcript = await _trial(stub, f"floor:{calls}", code, floor, calls, args.values)
                await _grade_ms(stub, f"trace:{calls}", t_transcript, 1)  # warm-up
                trace_ms = await _grade_ms(stub, f"trace:{calls}", t_transcript, args.repeat)
                floor_ms = await _grade_ms(stub, f"floor:{calls}", f_transcript, args.repeat)
                events = 2 * calls + 2
                extra = (trace_ms - floor_ms) * 1e3 / events
                print(f"{events:>8} {trace_ms:>20.2f} {floor_ms:>10.2f} {extra:>15.1f}")
        finally:
            channel.close()
            await handle.close()


if __name__ == "__main__":
    asyncio.run(main())
