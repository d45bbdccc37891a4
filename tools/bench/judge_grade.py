"""Benchmark: what the rubric judge adds to GradeTrial, beside GradeTrial without it (the floor).

    uv run python tools/bench/judge_grade.py [--rounds 15]

One trial over a state of N records (100 and 100k), after one write: to a record of that table, or
(100k) to a small second table, leaving the big one untouched. The floor is GradeTrial with a
JSONPath check only; the case adds an ``llm_judge`` answered by the mock judge (no network), so what is
measured is the runner's own judge overhead: reading the initial and final states (a snapshot round
trip), the diff, the evidence, the loop and the report. A real judge adds its model's latency on top.
Rounds alternate floor and case; medians in ms. The goal: one read of the final state (the
store's JSON answer) in the state size, the diff only over the tables that changed, the rest O(1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    GradeTrialRequest,
    JudgeStatus,
    RegisterTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerSettings, start_runner

TOOLS = textwrap.dedent(
    """
    from __future__ import annotations
    from typing import Any

    class Touch:
        @staticmethod
        def invoke(data: dict[str, Any], index: int) -> str:
            data["records"][index]["hits"] = 1
            return "ok"

    class Note:
        @staticmethod
        def invoke(data: dict[str, Any], index: int) -> str:
            data["notes"].append({"id": f"N-{index}", "text": "touched"})
            return "ok"
    """
)
PARAMS = {"type": "object", "properties": {"index": {"type": "integer"}}, "required": ["index"]}
RUBRIC = {
    "criteria": [
        {"id": "touched", "description": "The agent touched record 0."},
        {"id": "polite", "description": "The agent is polite.", "kind": "graded"},
    ]
}


def _spec(trial_id: str, code: Path, records: int, judged: bool) -> str:
    grading: dict[str, Any] = {
        "combine_method": "weighted",
        "weights": {"state_checks": 1.0, "llm_judge": 1.0},
        "pass_threshold": 1.0,
        "state_checks": {"jsonpaths": [{"path": "$.db.records[0].hits", "equals": 1}]},
    }
    spec: dict[str, Any] = {
        "trial_id": trial_id,
        "task": {
            "task_id": "bench",
            "agent_tools": [
                {
                    "name": name.lower(),
                    "parameters": PARAMS,
                    "source": {"module_path": "tools", "class_name": name},
                }
                for name in ("Touch", "Note")
            ],
            "tool_code": {"path": str(code)},
            "initial_state": {
                "tables": {
                    "records": [{"id": f"R-{i}", "value": i * 0.5, "tags": ["a"]} for i in range(records)],
                    "notes": [],
                }
            },
            "grading": grading,
        },
    }
    if judged:
        grading["llm_judge"] = {"rubric": RUBRIC}
        spec["judge_model"] = {"model": "tolokaforge-mock-judge"}
    return json.dumps(spec)


def _transcript(tool: str) -> str:
    return TRANSCRIPT.replace('"name": "touch"', f'"name": "{tool}"')


TRANSCRIPT = json.dumps(
    [
        {"role": "system", "content": "You are a bench agent."},
        {"role": "user", "content": "Touch record 0."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c0", "function": {"name": "touch", "arguments": '{"index": 0}'}}],
        },
        {"role": "tool", "content": "ok", "tool_call_id": "c0"},
        {"role": "assistant", "content": "Done, thank you!"},
    ]
)


async def _prepare(
    stub: RunnerServiceStub, trial_id: str, code: Path, records: int, tool: str, judged: bool
) -> None:
    request = RegisterTrialRequest(
        trial_id=trial_id,
        trial_spec_json=_spec(trial_id, code, records, judged),
        engine_protocol_version=ENGINE_PROTOCOL_VERSION,
    )
    response = await stub.register_trial(request)
    assert response.success, response.error
    call = ExecuteToolRequest(
        trial_id=trial_id, tool_name=tool, arguments_json='{"index": 0}', executor="agent", call_id="c0"
    )
    await stub.execute_tool(call)


async def _grade_ms(stub: RunnerServiceStub, trial_id: str, tool: str, judged: bool) -> float:
    started = time.perf_counter()
    response = await stub.grade_trial(
        GradeTrialRequest(
            trial_id=trial_id, llm_messages_json=_transcript(tool), termination_reason="agent_done"
        ),
        timeout=600,
    )
    elapsed = (time.perf_counter() - started) * 1e3
    assert response.success and response.grade is not None, response.error
    assert response.grade.judge_status == (JudgeStatus.COMPLETED if judged else JudgeStatus.UNSPECIFIED)
    return elapsed


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        code = Path(folder)
        (code / "tools.py").write_text(TOOLS)
        handle = await start_runner(RunnerSettings())
        channel = handle.channel()
        stub = RunnerServiceStub(channel)
        try:
            print(
                f"GradeTrial, medians over {rounds} alternating rounds (ms); floor = the same grade without a judge"
            )
            for records, tool in ((100, "touch"), (100_000, "touch"), (100_000, "note")):
                await _prepare(stub, "floor", code, records, tool, judged=False)
                await _prepare(stub, "judged", code, records, tool, judged=True)
                floor: list[float] = []
                case: list[float] = []
                for _ in range(rounds):
                    floor.append(await _grade_ms(stub, "floor", tool, judged=False))
                    case.append(await _grade_ms(stub, "judged", tool, judged=True))
                f, c = statistics.median(floor), statistics.median(case)
                print(
                    f"  {records:>7} records, {tool:>5}: with mock judge {c:9.2f}   floor {f:9.2f}   "
                    f"judge overhead {c - f:9.2f} ({c / f:5.1f}x)"
                )
                for trial_id in ("floor", "judged"):
                    await stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))
        finally:
            channel.close()
            await handle.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=15)
    asyncio.run(main(parser.parse_args().rounds))
