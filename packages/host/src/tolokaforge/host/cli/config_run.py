"""``tolokaforge run --config run_config.yaml``: a public run config as one run of packs x models.

The config (run_config.py) says which packs, which agent models and how many trials; this module turns
it into the run's pack (every pack's tasks once per model, matrix.py), its cells and one agent recipe
per model. An option the config also sets may not be given as a flag too: which one was meant would
be a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from ..agents.setup import AgentRecipe, LLMOptions
from ..errors import ConfigError, PackLoadError, PackProblem
from ..llm.generation import Generation, check_generation, parse_generation
from ..packs import Pack, load_pack
from ..packs.code_probe import Isolation
from ..run.config_file import RunConfigPlan, read_run_config
from ..run.matrix import Cell, combine_packs

__all__ = ["ConfigRun", "RecipeMaker", "plan_config_run"]

RecipeMaker = Callable[[str, LLMOptions, Pack], AgentRecipe]
"""How run_command makes a recipe (its script, its LLM-user rule) for an agent, its models and a pack."""

# The flags a run_config.yaml sets, by click parameter name, and the config key that sets each.
_SET_BY_CONFIG = {
    "pack_path": "evaluation.task_packs",
    "trials": "orchestrator.repeats",
    "concurrency": "orchestrator.workers",
    "output": "evaluation.output_dir",
    "model": "models.agent",
    "user_model": "models.user",
    "max_turns": "orchestrator.max_turns",
    "max_attempts": "orchestrator.max_attempt_retries",
}


@dataclass(frozen=True)
class ConfigRun:
    plan: RunConfigPlan
    pack: Pack
    cells: dict[str, Cell]
    agent: str
    base_url: str
    recipes: dict[str | None, AgentRecipe]
    """One recipe per agent model (``None``: the one golden or scripted agent)."""

    def cells_recorded(self) -> dict[str, dict[str, str | None]]:
        """The cells as run.yaml records them (``options.cells``)."""
        return {
            task_id: {"pack": cell.pack, "model": cell.model, "task_id": cell.task_id}
            for task_id, cell in self.cells.items()
        }


def _explicit(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def plan_config_run(ctx: click.Context, params: dict[str, Any], recipe_of: RecipeMaker) -> ConfigRun:
    """Read ``--config`` and build the run it describes; a ConfigError names every conflict."""
    path: Path = params["config_path"]
    clashes = [
        f"--{name.removesuffix('_path').replace('_', '-')} (the config's {key})"
        for name, key in _SET_BY_CONFIG.items()
        if _explicit(ctx, name)
    ]
    if clashes:
        raise ConfigError(
            f"--config {path} sets these, so give them in the config only: {', '.join(clashes)}"
        )
    plan = read_run_config(path)
    agent: str = params["agent"] if _explicit(ctx, "agent") else ("llm" if plan.agent_models else "golden")
    if agent == "llm" and not plan.agent_models:
        raise ConfigError(f"--config {path}: models.agent is required for --agent llm")
    if agent != "llm" and plan.agent_models:
        raise ConfigError(
            f"--config {path}: models.agent names models the {agent} agent does not use; "
            "remove models.agent or run --agent llm"
        )
    packs = _load_packs(plan, params["isolation"], tuple(params["sandbox_without"]))
    names: list[str | None] = [model.name for model in plan.agent_models] or [None]
    pack, cells = combine_packs(packs, names)
    base_url: str = params["base_url"]
    if not _explicit(ctx, "base_url") and plan.base_url is not None:
        base_url = plan.base_url
    user = plan.user_model
    generation = parse_generation(params["gen"])
    where = (f"--config {path}", "--gen")
    recipes: dict[str | None, AgentRecipe] = {}
    for model in plan.agent_models or (None,):
        llm = LLMOptions(
            model=model.name if model else None,
            user_model=user.name if user else None,
            base_url=base_url,
            prices=params["prices"],
            timeout_s=params["llm_timeout"],
            max_retries=params["llm_max_retries"],
            generation=generation.get("agent", Generation()).over(
                model.generation if model else Generation()
            ),
            user_generation=generation.get("user", Generation()).over(
                user.generation if user else Generation()
            ),
            anthropic_base_url=params["anthropic_base_url"],
        )
        if model is not None:
            check_generation("agent", model.name, llm.generation, where)
        if user is not None:
            check_generation("user", user.name, llm.user_generation, where)
        recipes[model.name if model else None] = recipe_of(agent, llm, pack)
    return ConfigRun(plan, pack, cells, agent, base_url, recipes)


def _load_packs(plan: RunConfigPlan, isolation: Isolation, without: tuple[str, ...]) -> list[Pack]:
    """Every pack of the config, or one PackLoadError holding the problems of all of them."""
    packs: list[Pack] = []
    problems: list[PackProblem] = []
    for index, path in enumerate(plan.packs):
        if not path.is_dir():
            problems.append(PackProblem(path, f"evaluation.task_packs[{index}]", "is not a directory"))
            continue
        try:
            packs.append(
                load_pack(path, tasks_glob=plan.tasks_glob, isolation=isolation, sandbox_without=without)
            )
        except PackLoadError as error:
            problems.extend(error.problems)
    if problems:
        raise PackLoadError(problems)
    return packs
