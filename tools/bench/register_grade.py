"""Benchmark: RegisterTrial and GradeTrial over big states, beside floors measured in the same run.

    uv run python tools/bench/register_grade.py [--sizes 4,10000,100000] [--repeat 5]

A runner in another process (``tolokaforge-runner --store memory``), one table of N records, a golden
path of one write. For each N it prints, as medians over ``--repeat`` trials:

* RegisterTrial of the first trial of a task (the runner has never seen it: task_json and its
  digest), of the 2nd..Nth trial of the same task (the digest only: O(1) in N), and of a trial sent
  the plain way (the whole TrialSpec, parsed again; the store shares the initial state);
* GradeTrial when the trial's state hash matches the golden replay's, and when it differs (the
  trial wrote another record, so the grader also diffs the two states), both with the task's golden
  replays; and ``!= again``, the task's next differing grade, once the memo holds the golden outcome
  and the diff knows the initial table's identity field (what a failing trial usually pays);
* the floors: ``json.loads`` of the request's own TrialSpec payload (timed in each round just before
  its first RegisterTrial, the median of three), the round trip of the same
  payload through a bare grpclib echo servicer (what any RegisterTrial costs to move), and the
  canonical stable hash of the state (sorted-key JSON + sha256).

A second table follows: the plain path, a foreign engine's way (the whole TrialSpec in
``trial_spec_json``, no digest, no parts; docs/protocol/runner.md). For each N, medians over the
rounds, each round with tasks the runner has never seen:

* ``new``: the first trial of a task never seen, sent the plain way (two such tasks a round: one
  whose first trial matches the golden path, one whose first trial differs);
* ``same``: the 2nd..5th trials of one of those tasks, each a new trial sent the plain way (two
  whose state matches, two whose state differs);

each with RegisterTrial, the first ExecuteTool (a read-only ``ping``, which starts the trial's
worker) sent at once (``call 1``) or, as an engine would after a model turn, a second later
(``c1 later``: the second new task's first trial, and the 4th and 5th trials of a task), the second
ExecuteTool (``touch``, one write), and GradeTrial (``grade =`` / ``grade !=``), beside the same
floors as above.

Goals: RegisterTrial <= 2x the json.loads floor at 10k and 100k, the 2nd..Nth trial flat in N, and
GradeTrial <= 150 ms at 100k whether the hash matches or not; on the plain path at 100k, GradeTrial
<= 150 ms and the first ExecuteTool <= 20 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from grpclib.client import Channel
from grpclib.server import Server
from runner_calls import PARAMS, TOOLS
from runner_process import free_port, runner_process

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    ExecutionStatus,
    GradeTrialRequest,
    RegisterTrialRequest,
    RegisterTrialResponse,
    RunnerServiceBase,
    RunnerServiceStub,
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION

TURN_S = 1.0
"""A model turn: how long after its registration a plain-path trial's first call comes (``c1 later``)."""


class EchoServicer(RunnerServiceBase):
    """The transport floor: decode the RegisterTrial request, answer success, nothing else."""

    async def register_trial(self, message: RegisterTrialRequest) -> RegisterTrialResponse:
        return RegisterTrialResponse(success=True)


def task(code: Path, records: int) -> dict[str, Any]:
    table = [
        {"id": f"R-{i}", "name": f"record {i}", "value": i * 0.5, "tags": ["a", "b"]} for i in range(records)
    ]
    return {
        "task_id": f"bench-{records}",
        "agent_tools": [
            {
                "name": name.lower(),
                "parameters": params,
                "source": {"module_path": "tools", "class_name": name},
            }
            for name, params in PARAMS.items()
        ],
        "tool_code": {"path": str(code)},
        "initial_state": {"tables": {"records": table}},
        "grading": {
            "combine_method": "weighted",
            "weights": {"state_checks": 1.0},
            "pass_threshold": 1.0,
            "state_checks": {
                "hash_enabled": True,
                "golden_actions": [{"tool_name": "touch", "arguments": {"index": 0}}],
            },
        },
    }


def spec_json(trial_id: str, the_task: dict[str, Any]) -> str:
    return json.dumps({"trial_id": trial_id, "task": the_task})


def canonical_hash(tables: dict[str, Any]) -> str:
    encoded = json.dumps(tables, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(encoded.encode()).hexdigest()


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def timed(function: Callable[[], object], repeat: int) -> float:
    samples: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return median_ms(samples)


async def timed_async(call: Awaitable[object]) -> float:
    started = time.perf_counter()
    await call
    return time.perf_counter() - started


@asynccontextmanager
async def runner_stub(isolation: str) -> AsyncGenerator[RunnerServiceStub]:
    """A stub on ``tolokaforge-runner --store memory --isolation ISOLATION`` in another process."""
    async with runner_process("--store", "memory", "--isolation", isolation) as runner:
        channel = runner.channel()
        try:
            yield RunnerServiceStub(channel)
        finally:
            channel.close()


@asynccontextmanager
async def echo_server() -> AsyncGenerator[RunnerServiceStub]:
    server = Server([EchoServicer()])
    port = free_port()
    await server.start("127.0.0.1", port)
    channel = Channel("127.0.0.1", port)
    try:
        yield RunnerServiceStub(channel)
    finally:
        channel.close()
        server.close()
        await server.wait_closed()


async def register(
    stub: RunnerServiceStub, trial_id: str, payload: str, task_json: str = "", task_digest: str = ""
) -> None:
    answer = await stub.register_trial(
        RegisterTrialRequest(
            trial_id=trial_id,
            trial_spec_json=payload,
            engine_protocol_version=ENGINE_PROTOCOL_VERSION,
            task_json=task_json,
            task_digest=task_digest,
        )
    )
    assert answer.success, answer.error


async def register_by_digest(stub: RunnerServiceStub, trial_id: str, digest: str) -> None:
    """A later trial of a task the runner was sent: the TrialSpec without its task, and the digest."""
    await register(stub, trial_id, json.dumps({"trial_id": trial_id}), task_digest=digest)


async def grade(stub: RunnerServiceStub, trial_id: str, expect_match: bool) -> None:
    answer = await stub.grade_trial(GradeTrialRequest(trial_id=trial_id))
    assert answer.success, answer.error
    assert answer.grade is not None and answer.grade.binary_pass is expect_match, answer.grade


async def touch(stub: RunnerServiceStub, trial_id: str, index: int) -> None:
    answer = await stub.execute_tool(
        ExecuteToolRequest(
            trial_id=trial_id,
            tool_name="touch",
            arguments_json=json.dumps({"index": index}),
            executor="agent",
            call_id="c0",
        )
    )
    assert answer.status == ExecutionStatus.SUCCESS, answer.error_message


async def ping(stub: RunnerServiceStub, trial_id: str) -> None:
    answer = await stub.execute_tool(
        ExecuteToolRequest(
            trial_id=trial_id,
            tool_name="ping",
            arguments_json=json.dumps({"text": "x"}),
            executor="agent",
            call_id="c-ping",
        )
    )
    assert answer.status == ExecutionStatus.SUCCESS, answer.error_message


class PlainFigures:
    """One kind of plain-path trial's samples (seconds), per step."""

    def __init__(self) -> None:
        self.register: list[float] = []
        self.first_call: list[float] = []
        self.first_call_later: list[float] = []
        self.second_call: list[float] = []
        self.match: list[float] = []
        self.differ: list[float] = []

    def row(self) -> str:
        columns = (
            self.register,
            self.first_call,
            self.first_call_later,
            self.second_call,
            self.match,
            self.differ,
        )
        return "".join(f"{median_ms(samples) if samples else float('nan'):>10.1f}" for samples in columns)


async def plain_trial(
    stub: RunnerServiceStub,
    figures: PlainFigures,
    trial_id: str,
    the_task: dict[str, Any],
    index: int,
    *,
    pause: bool = False,
) -> None:
    """One trial sent the plain way: registered, a read, a write of record ``index``, graded, cleaned up.
    ``pause``: the first call comes a model turn after the registration (:data:`TURN_S`), not at once."""
    records = len(the_task["initial_state"]["tables"]["records"])
    payload = spec_json(trial_id, the_task)
    figures.register.append(await timed_async(register(stub, trial_id, payload)))
    if pause:
        await asyncio.sleep(TURN_S)
    first_call = figures.first_call_later if pause else figures.first_call
    first_call.append(await timed_async(ping(stub, trial_id)))
    figures.second_call.append(await timed_async(touch(stub, trial_id, index)))
    matches = index == 0 or records == 1
    samples = figures.match if matches else figures.differ
    samples.append(await timed_async(grade(stub, trial_id, matches)))
    await stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))


async def measure_plain(
    records: int, repeat: int, code: Path, stub: RunnerServiceStub, echo: RunnerServiceStub
) -> None:
    """The plain path's rows for N records (module doc)."""
    payload = spec_json(f"plain-{records}:0", task(code, records))
    tables = json.loads(payload)["task"]["initial_state"]["tables"]
    hash_ms = timed(lambda: canonical_hash(tables), repeat)
    echo_ms = median_ms([await timed_async(register(echo, f"e:{i}", payload)) for i in range(repeat)])
    new, same = PlainFigures(), PlainFigures()
    loads: list[float] = []
    for round_ in range(repeat):
        fresh: list[dict[str, Any]] = []
        for variant in range(2):
            the_task = task(code, records)
            the_task["task_id"] = f"plain-{records}-{round_}-{variant}"
            the_task["initial_state"]["tables"]["records"][-1]["value"] = -1 - 2 * round_ - variant
            fresh.append(the_task)
        loads.append(timed(lambda: json.loads(payload), 3) / 1e3)
        await plain_trial(stub, new, f"{fresh[0]['task_id']}:0", fresh[0], 0)
        await plain_trial(stub, new, f"{fresh[1]['task_id']}:0", fresh[1], min(1, records - 1), pause=True)
        for trial, index in enumerate((0, 1, 0, 2), start=1):
            trial_id = f"{fresh[0]['task_id']}:{trial}"
            await plain_trial(stub, same, trial_id, fresh[0], min(index, records - 1), pause=trial > 2)
    floors = f"{median_ms(loads):>10.1f}{echo_ms:>10.1f}{hash_ms:>10.1f}"
    print(f"{records:>8}{'new':>6}{new.row()}{floors}")
    print(f"{records:>8}{'same':>6}{same.row()}{floors}")


async def measure(
    records: int, repeat: int, code: Path, stub: RunnerServiceStub, echo: RunnerServiceStub
) -> None:
    the_task = task(code, records)
    payload = spec_json(f"bench-{records}:0", the_task)
    tables = json.loads(payload)["task"]["initial_state"]["tables"]
    hash_ms = timed(lambda: canonical_hash(tables), repeat)
    echo_ms = median_ms([await timed_async(register(echo, f"e:{i}", payload)) for i in range(repeat)])

    loads: list[float] = []
    first: list[float] = []
    later: list[float] = []
    plain: list[float] = []
    match: list[float] = []
    differ: list[float] = []
    again: list[float] = []
    for round_ in range(repeat):
        # A task the runner has never seen: a new task_id and a new initial state (one value differs).
        fresh = task(code, records)
        fresh["task_id"] = f"bench-{records}-{round_}"
        fresh["initial_state"]["tables"]["records"][-1]["value"] = -round_ if records else 0
        ids = [f"{fresh['task_id']}:{i}" for i in range(4)]
        task_json = json.dumps(fresh)
        digest = hashlib.sha256(task_json.encode()).hexdigest()
        # 1st: the task sent once, with its digest (the host's way with a runner that accepts digests).
        first_payload = json.dumps({"trial_id": ids[0]})
        # The floor is taken in the same round, just before: the machine's speed drifts over a run.
        loads.append(timed(lambda: json.loads(payload), 3) / 1e3)
        first.append(await timed_async(register(stub, ids[0], first_payload, task_json, digest)))
        for trial_id in ids[1:3]:
            later.append(await timed_async(register_by_digest(stub, trial_id, digest)))
        plain_payload = spec_json(ids[3], fresh)
        plain.append(await timed_async(register(stub, ids[3], plain_payload)))
        await touch(stub, ids[0], 0)  # the golden path: the hash matches
        await touch(stub, ids[1], min(1, records - 1))  # another record: the hash differs
        await touch(stub, ids[2], min(2, records - 1))
        match.append(await timed_async(grade(stub, ids[0], True)))
        differ.append(await timed_async(grade(stub, ids[1], records == 1)))
        # The task's next differing grade: what most trials that fail pay (the first analysed the task).
        again.append(await timed_async(grade(stub, ids[2], records == 1)))
        for trial_id in ids:
            await stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))

    register_first, register_later, loads_ms = median_ms(first), median_ms(later), median_ms(loads)
    print(
        f"{records:>8}{register_first:>10.1f}{register_later:>10.1f}{median_ms(plain):>10.1f}{median_ms(match):>10.1f}"
        f"{median_ms(differ):>10.1f}{median_ms(again):>10.1f}{loads_ms:>10.1f}{echo_ms:>10.1f}{hash_ms:>10.1f}"
        f"{register_first / loads_ms:>10.2f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="4,10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--isolation", choices=("process", "thread"), default="process", help="the runner's --isolation"
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="tf-bench-") as scratch:
        code = Path(scratch) / "code"
        code.mkdir()
        (code / "tools.py").write_text(TOOLS)
        print(
            "ms, medians; register: 1st trial of a task (task_json + digest) / 2nd..Nth (digest only) /"
            " plain TrialSpec; grade: hash matches / differs / differs again (the task's next)"
        )
        print(
            f"{'records':>8}{'reg 1st':>10}{'reg Nth':>10}{'plain':>10}{'grade =':>10}{'grade !=':>10}{'!= again':>10}"
            f"{'loads':>10}{'echo':>10}{'hash':>10}{'1st/loads':>10}"
        )
        async with runner_stub(args.isolation) as stub, echo_server() as echo:
            await register(stub, "warm:0", spec_json("warm:0", task(code, 4)))
            await stub.cleanup_trial(CleanupTrialRequest(trial_id="warm:0"))
            for records in sizes:
                await measure(records, args.repeat, code, stub, echo)
            print()
            print(
                "the plain path (whole TrialSpec, no digest), ms, medians; new: a task's 1st trial,"
                " same: its 2nd..5th; call 1: ping (starts the worker) at once, or a model turn"
                f" ({TURN_S:g} s) after the registration; call 2: touch (one write)"
            )
            print(
                f"{'records':>8}{'task':>6}{'register':>10}{'call 1':>10}{'c1 later':>10}{'call 2':>10}"
                f"{'grade =':>10}{'grade !=':>10}{'loads':>10}{'echo':>10}{'hash':>10}"
            )
            for records in sizes:
                await measure_plain(records, args.repeat, code, stub, echo)


if __name__ == "__main__":
    asyncio.run(main())
