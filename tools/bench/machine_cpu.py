"""The benchmarks' one way to read how much CPU the whole machine spent (Linux ``/proc/stat``)."""

from __future__ import annotations

import os
from pathlib import Path


def machine_seconds() -> tuple[float, float]:
    """(busy, elapsed) CPU seconds of the whole machine so far, summed over its cores.

    Busy is everything but idle and iowait: every process's work and the kernel's (file system, page
    faults, process teardown), whichever process it was done for. Differences between two readings
    give what a piece of work cost the machine, however many processes it spread over.
    """
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / ticks, sum(fields) / ticks


def tree_seconds() -> dict[int, float]:
    """CPU seconds of this process and each live descendant so far, by pid (Linux ``/proc``).

    Each process's own time plus its reaped children's, so a worker that exited and was waited for still
    counts (in its parent). Unlike :func:`machine_seconds`, other work on a shared machine is left out.
    Subtract with :func:`tree_spent`.
    """
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        spent[pid] = sum(int(value) for value in fields[11:15]) / ticks
    mine = {os.getpid()}
    grown = True
    while grown:
        found = {pid for pid, parent in parents.items() if parent in mine} - mine
        grown = bool(found)
        mine |= found
    return {pid: spent[pid] for pid in mine}


def tree_spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds this process tree spent between two :func:`tree_seconds` readings."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())
