"""The cyclic garbage collector's settings for a Tolokaforge process that runs many trials.

A run keeps hundreds of trials in flight, each allocating thousands of short-lived containers per
turn (parsed model answers, messages, tool results). With CPython's defaults (a young collection
every 700 net allocations) the collector ran about a hundred times a second, and the older
generations' passes walked everything the process had imported and loaded, the pack included:
measured in `tools/bench/llm_bound.py` at 256 concurrent trials, 1.4 s of collection in a 10 s run,
pauses up to 157 ms on the host's event loop. Freezing what is alive once the process is set up
(imports, the loaded pack: it lives as long as the process) keeps it out of every later pass, and a
larger young generation makes passes rarer; the same run then spends about 0.1 s collecting, with
pauses under 30 ms. Garbage cycles are still collected, only in larger batches.

Only process owners call :func:`tune_collector` (the ``tolokaforge`` and ``tolokaforge-runner``
commands, the benchmarks that stand in for them): a library does not change its caller's collector.
"""

from __future__ import annotations

import gc

__all__ = ["THRESHOLDS", "tune_collector"]

THRESHOLDS = (50_000, 20, 100)
"""``gc.set_threshold``: young collections every 50,000 net allocations (CPython's default: 700)."""


def tune_collector() -> None:
    """Freeze what is alive now into the permanent generation and set :data:`THRESHOLDS`."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
