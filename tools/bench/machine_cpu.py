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
