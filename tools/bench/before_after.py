"""Benchmark harness: one benchmark script run on this tree and on an earlier revision, alternating.

    uv run python tools/bench/before_after.py --rev REV [--rounds 3] -- tools/bench/host_run.py --trials 3

Checks ``REV`` out into a temporary git worktree with its own environment (``uv sync --frozen``), then
runs the script (with the arguments after ``--``) there and here in turn, ``--rounds`` times, each run
in its own process, and prints every run's output under a label saying which tree it came from. Runs
alternate so that a machine whose speed drifts over the minutes (other work, thermal state) treats both
trees alike; compare the figures round by round. The script must exist in both trees.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(tree: Path, script: list[str], label: str) -> None:
    result = subprocess.run(
        ["uv", "run", "--frozen", "python", *script],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    print(f"===== {label} (exit {result.returncode})", flush=True)
    print(result.stdout.rstrip(), flush=True)
    if result.returncode != 0:
        print(result.stderr.rstrip()[-4000:], flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rev", required=True, help="the earlier revision (any git revision name)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS...]")
    args = parser.parse_args()
    script = [part for part in args.script if part != "--"]
    if not script:
        parser.error("name the benchmark script after --")
    rev = subprocess.run(
        ["git", "rev-parse", "--short", args.rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="tf-before-") as scratch:
        before = Path(scratch) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(before), rev], cwd=ROOT, check=True)
        try:
            subprocess.run(["uv", "sync", "--frozen", "--quiet"], cwd=before, check=True)
            for round_ in range(1, args.rounds + 1):
                _run(before, script, f"round {round_}: before ({rev})")
                _run(ROOT, script, f"round {round_}: after (this tree)")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, check=False)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
