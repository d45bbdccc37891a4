"""Benchmark: golden web trials/s on the web shop pack, beside the retail pack's in the same run.

    uv run python tools/bench/web_golden.py [--trials 4] [--concurrency 1 4] [--isolation sandbox|process|thread]
        [--golden-replay task|trial]

Runs every task of examples/packs/web_shop with the golden agent on the embedded runner (what
``tolokaforge run --pack examples/packs/web_shop`` does): each trial opens a fresh browser context on
the runner's warm Chromium, drives the shop by its golden ``browser`` calls (each page and form post
answered by the pack's routes in the trial's worker), and is graded by hash replay, JSONPath and web
checks. It prints trials/s (and the steady rate between the first and last tenth of the trials, and
when the first trial finished), then the floor measured the same way in the same run: the example
retail pack's golden trials/s, whose trials make tool calls but open no browser. Same settings for both;
the ratio says what the browser costs a golden trial. ``--golden-replay trial`` replays the golden
path (in the browser, for web tasks) for every trial instead of once per task.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Literal

from host_run import trial_rate

from tolokaforge.core.collector import tune_collector
from tolokaforge.host import load_pack

REPO = Path(__file__).resolve().parents[2]
WEB_PACK = REPO / "examples" / "packs" / "web_shop"
RETAIL_PACK = REPO / "examples" / "packs" / "retail"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trials", type=int, default=4, help="trials per task")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--isolation", choices=("sandbox", "process", "thread"), default="sandbox")
    parser.add_argument("--golden-replay", choices=("task", "trial"), default="task")
    args = parser.parse_args()
    golden_replay: Literal["task", "trial"] = args.golden_replay
    web, retail = load_pack(WEB_PACK), load_pack(RETAIL_PACK)
    tune_collector()  # as `tolokaforge run` does once the pack is loaded
    print(
        f"golden agent, embedded runner, {args.isolation} isolation, golden replay per {golden_replay}; "
        f"{args.trials} trial(s) per task: web_shop {len(web.tasks)} tasks, retail {len(retail.tasks)} tasks"
    )
    print(f"{'pack':<10}{'conc':>5}{'trials':>8}{'trials/s':>10}{'steady':>8}{'1st ms':>8}{'pass':>6}")
    scratch = Path(tempfile.mkdtemp(prefix="tf-bench-web-"))
    try:
        # warm-up: imports, the code bundles, the zygote (and nothing of Chromium: each run starts its own)
        for pack in (retail, web):
            await trial_rate(None, pack, 1, 1, golden_replay, args.isolation, output=_fresh(scratch))
        for concurrency in args.concurrency:
            figures: dict[str, float] = {}
            for name, pack in (("web_shop", web), ("retail", retail)):
                rate, passed, ran, steady, first = await trial_rate(
                    None,
                    pack,
                    concurrency,
                    args.trials,
                    golden_replay,
                    args.isolation,
                    output=_fresh(scratch),
                )
                figures[name] = rate
                print(
                    f"{name:<10}{concurrency:>5}{ran:>8}{rate:>10.2f}{steady:>8.1f}{first:>8.0f}{passed:>6.2f}"
                )
            print(f"{'':<10}{'':>5}{'web_shop / retail:':>26}{figures['web_shop'] / figures['retail']:>9.2f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _fresh(scratch: Path) -> Path:
    """A new run folder (a run needs an output without a run in it)."""
    return Path(tempfile.mkdtemp(prefix="run-", dir=scratch))


if __name__ == "__main__":
    asyncio.run(main())
