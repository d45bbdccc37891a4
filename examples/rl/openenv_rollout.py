"""An OpenEnv rollout loop over the retail pack, end to end, training nothing.

The pack is served with OpenEnv's own server (WebSocket sessions, one environment each) behind a bearer
token ``serve`` makes and hands back with its URL; the loop is what a trainer's actor does with OpenEnv's
client, given that token: reset a task, ask the model (here a local golden model server,
examples/rl/golden_model_server.py) for each turn, step with its message until ``done``. The reward on
the last step is the runner's grade of the trial.

    uv run python examples/rl/openenv_rollout.py [--task ID ...] [--output DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from golden_model_server import golden_model_server
from openai import AsyncOpenAI

from tolokaforge.env import Environments
from tolokaforge.env.adapters.openenv_env import ChatAction, Served, TolokaforgeClient, serve

RETAIL = Path(__file__).resolve().parents[1] / "packs" / "retail"


async def episode(served: Served, model: AsyncOpenAI, task_id: str, seed: int = 0) -> dict[str, Any]:
    """One episode through OpenEnv's client: the model's messages in, observations and the reward out."""
    client = TolokaforgeClient(served.url, token=served.token)
    try:
        result = await client.reset(task_id=task_id, seed=seed)
        # Plain dicts: the OpenAI SDK's TypedDicts are the same shapes.
        messages: list[Any] = list(result.observation.messages)
        tools: Any = result.observation.tools
        while not result.done:
            reply = await model.chat.completions.create(
                model="golden-stand-in", messages=messages, tools=tools
            )
            message = reply.choices[0].message.model_dump(exclude_none=True)
            messages.append(message)
            result = await client.step(ChatAction(message=message))
            messages.extend(result.observation.messages)
        last = result.observation
        grade = {"passed": last.passed, "components": last.components, "reasons": last.reasons}
        return {"task_id": task_id, "reward": result.reward, "grade": grade, "termination": last.termination}
    finally:
        await client.close()


async def run(
    pack: Path = RETAIL,
    *,
    tasks: list[str] | None = None,
    output: Path | None = None,
    skip_actions: bool = False,
    concurrency: int = 8,
) -> list[dict[str, Any]]:
    """One OpenEnv episode per task, ``concurrency`` sessions at a time."""
    with golden_model_server(pack, skip_actions=skip_actions) as model_url:
        async with Environments.open(pack, output=output) as envs:
            chosen = tasks or envs.task_ids
            async with serve(envs, max_concurrent_envs=concurrency) as served:
                model = AsyncOpenAI(base_url=model_url, api_key="local")
                slots = asyncio.Semaphore(concurrency)

                async def one(task_id: str) -> dict[str, Any]:
                    async with slots:
                        return await episode(served, model, task_id)

                rows = await asyncio.gather(*(one(task_id) for task_id in chosen))
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
