"""A verifiers rollout loop over the retail pack, end to end, training nothing.

verifiers drives each episode as it would in training: its OpenAI client asks the model (here a local
golden model server, examples/rl/golden_model_server.py) for every turn, and its environment hooks are
tolokaforge.env steps, so tool calls run through the runner and the simulated user answers plain
messages. Each rollout's reward is the runner's grade of its trial.

    uv run python examples/rl/verifiers_rollout.py [--task ID ...] [--output DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any, cast

from golden_model_server import golden_model_server
from openai import AsyncOpenAI
from verifiers.clients import OpenAIChatCompletionsClient  # pyright: ignore[reportMissingTypeStubs]

from tolokaforge.env import Environments
from tolokaforge.env.adapters.verifiers_env import load_environment

RETAIL = Path(__file__).resolve().parents[1] / "packs" / "retail"


def _quiet(*_args: Any) -> None:
    """Replaces verifiers' progress bar."""


async def run(
    pack: Path = RETAIL,
    *,
    tasks: list[str] | None = None,
    output: Path | None = None,
    skip_actions: bool = False,
    concurrency: int = 8,
) -> list[dict[str, Any]]:
    """One verifiers rollout per task; each row: task id, verifiers' reward, the grade it was scored from."""
    with golden_model_server(pack, skip_actions=skip_actions) as base_url:
        async with Environments.open(pack, output=output) as envs:
            env = load_environment(envs, tasks)
            client = OpenAIChatCompletionsClient(AsyncOpenAI(base_url=base_url, api_key="local"))
            results = await env.evaluate(  # pyright: ignore[reportUnknownMemberType]
                client,
                "golden-stand-in",
                max_concurrent=concurrency,
                state_columns=["tolokaforge_grade"],
                on_start=_quiet,
                on_progress=_quiet,
            )
    rows: list[dict[str, Any]] = []
    for out in results["outputs"]:
        info = cast(dict[str, Any], out["info"])
        rows.append({"task_id": info["task_id"], "reward": out["reward"], "grade": out["tolokaforge_grade"]})
    return sorted(rows, key=lambda row: str(row["task_id"]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pack", type=Path, default=RETAIL)
    parser.add_argument("--task", action="append", help="a task id (repeatable; default: every task)")
    parser.add_argument("--output", type=Path, help="a new folder the trials are written to")
    parser.add_argument("--json", type=Path, help="write the rows here as JSON")
    parser.add_argument("--skip-actions", action="store_true", help="the model skips the golden actions")
    args = parser.parse_args()
    rows = asyncio.run(run(args.pack, tasks=args.task, output=args.output, skip_actions=args.skip_actions))
    for row in rows:
        print(f"{row['task_id']:45} reward {row['reward']:.3f}  passed {row['grade']['passed']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
