"""Benchmark: the memory of 64 concurrent trials of one big task, beside the memory of one.

    uv run python tools/bench/trial_memory.py [--records 100000] [--trials 64] [--isolation process]

A runner in another process (``tolokaforge-runner --store memory``), one task whose state is one table
of ``--records`` records. The task is sent once (task_json + digest), then every trial registers by
digest and makes one write (``touch``), so each has a tool worker (isolated mode) and a table of its
own to change. Printed, after 1 trial and after ``--trials`` trials: the runner's PSS, the PSS summed
over its descendants (tool workers, zygotes), and their total -- the physical memory the process
tree uses (PSS counts a page shared by n processes as 1/n in each). The bound: the total for
``--trials`` trials within 2x the total for one. The floor is the runner before any trial.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import tempfile
from pathlib import Path

import psutil
from register_grade import register, register_by_digest, task, touch
from runner_calls import TOOLS
from runner_process import RunnerProcess, runner_process

from tolokaforge.contracts.runner import CleanupTrialRequest, RunnerServiceStub

MIB = 1024 * 1024


def footprint(pid: int) -> tuple[float, float]:
    """(the runner's PSS, the summed PSS of its descendants), MiB.

    PSS (proportional set size) counts a page shared by n processes as 1/n in each, so the sum over a
    process tree is the physical memory the tree uses: a zygote's pages its forked workers share are
    counted once, not once per worker (RSS) or not at all (USS)."""
    runner = psutil.Process(pid)
    own = runner.memory_full_info().pss / MIB
    shared = 0.0
    for child in runner.children(recursive=True):
        try:
            shared += child.memory_full_info().pss / MIB
        except psutil.Error:  # a worker that ended meanwhile
            continue
    return own, shared


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--isolation", choices=("process", "thread"), default="process")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tf-bench-") as scratch:
        code = Path(scratch)
        (code / "tools.py").write_text(TOOLS)
        options = ("--store", "memory", "--isolation", args.isolation)
        async with runner_process(*options) as runner:
            await measure(runner, code, args.records, args.trials, args.isolation)


async def measure(runner: RunnerProcess, code: Path, records: int, trials: int, isolation: str) -> None:
    pid = runner.process.pid
    channel = runner.channel()
    stub = RunnerServiceStub(channel)
    try:
        the_task = task(code, records)
        task_json = json.dumps(the_task)
        digest = hashlib.sha256(task_json.encode()).hexdigest()
        base_own, base_children = footprint(pid)
        ids = [f"{the_task['task_id']}:{index}" for index in range(trials)]
        await register(stub, ids[0], json.dumps({"trial_id": ids[0]}), task_json, digest)
        await touch(stub, ids[0], 0)
        one_own, one_children = footprint(pid)
        for trial_id in ids[1:]:
            await register_by_digest(stub, trial_id, digest)
        await asyncio.gather(*(touch(stub, trial_id, n) for n, trial_id in enumerate(ids[1:], 1)))
        many_own, many_children = footprint(pid)
        print(f"{records} records, isolation {isolation}; MiB")
        print(f"{'':>16}{'runner PSS':>12}{'workers PSS':>13}{'total':>10}{'above floor':>13}")
        base = base_own + base_children
        for label, own, children in (
            ("floor (0 trials)", base_own, base_children),
            ("1 trial", one_own, one_children),
            (f"{trials} trials", many_own, many_children),
        ):
            total = own + children
            print(f"{label:>16}{own:>12.1f}{children:>13.1f}{total:>10.1f}{total - base:>13.1f}")
        ratio = (many_own + many_children) / (one_own + one_children)
        print(f"total for {trials} trials / total for 1: {ratio:.2f}x (bound: 2x)")
        for trial_id in ids:
            await stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))
    finally:
        channel.close()


if __name__ == "__main__":
    asyncio.run(main())
