"""``validate --golden``: each task's golden path played on the embedded runner, so OK means it grades.

The golden path is the task's ``state_checks.hash.golden_actions`` then its ``golden_response`` (a
Terminal-Bench task's is ``solution/solve.sh``, one ``bash`` call). It runs exactly as ``tolokaforge run
--agent golden`` runs it (sandbox, stand-in users, every grading component) into a scratch folder, and
every task whose golden trial does not pass is a problem naming the reason. A task with neither has
no golden path to play: it is listed, not run.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tolokaforge.core.models import JudgeModelConfig

from ..agents.setup import AgentRecipe, LLMOptions
from ..llm import llm_session
from ..llm.chat import DEFAULT_BASE_URL
from ..packs import Pack
from .schedule import RunSettings, run_pack

__all__ = ["GoldenCheck", "check_golden_paths"]


@dataclass
class GoldenCheck:
    failed: dict[str, str] = field(default_factory=dict[str, str])
    """Task id -> why its golden trial did not pass."""
    passed: list[str] = field(default_factory=list[str])
    without_path: list[str] = field(default_factory=list[str])
    """Tasks with no golden actions and no golden response: nothing to play."""


async def check_golden_paths(
    pack: Pack,
    *,
    judge_model: JudgeModelConfig | None = None,
    concurrency: int = 2,
    isolation: Literal["sandbox", "process", "thread"] = "sandbox",
    sandbox_without: tuple[str, ...] = (),
) -> GoldenCheck:
    check = GoldenCheck()
    playable: list[str] = []
    for loaded in pack.tasks:
        task = loaded.task
        state_checks = task.grading.state_checks
        actions = state_checks.golden_actions if state_checks is not None else []
        if actions or task.golden_response:
            playable.append(loaded.task_id)
        else:
            check.without_path.append(loaded.task_id)
    if not playable:
        return check
    recipe = AgentRecipe.of("golden", LLMOptions(None, None, DEFAULT_BASE_URL, None), None, False)
    with tempfile.TemporaryDirectory(prefix="tolokaforge-golden-") as scratch:
        settings = RunSettings(
            output=Path(scratch) / "run",
            concurrency=concurrency,
            task_ids=tuple(playable),
            judge_model=judge_model,
            max_attempts=1,
            isolation=isolation,
            sandbox_without=sandbox_without,
        )
        async with llm_session(concurrency) as session:
            agents, users = recipe.build(session)
            summary = await run_pack(pack, agents, users, settings)
    for row in summary.rows:
        if row.passed:
            check.passed.append(row.task_id)
        else:
            check.failed[row.task_id] = row.reason or row.kind
    return check
