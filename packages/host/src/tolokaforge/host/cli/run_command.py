"""``tolokaforge run``: run a pack with an agent, on the embedded runner or a remote one.

Exit status (``exit_status``): 0 all trials graded (and ``--fail-under`` met), 1 a trial unfinished,
lost or not gradeable (or the pass rate below ``--fail-under``), 2 usage/pack/configuration errors, a
runner or model that fails its check before any trial (llm/preflight.py), and trials the infrastructure
left unfinished (``--resume`` runs them), 130 interrupted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import click
from pydantic import ValidationError
from rich.console import Console

from tolokaforge.core.collector import tune_collector
from tolokaforge.core.llm import split_model
from tolokaforge.core.models import JudgeModelConfig, JudgePrice, describe_validation_error

from ..agents import load_script
from ..agents.base import AgentFactory
from ..agents.setup import AgentRecipe, LLMOptions
from ..errors import ConfigError
from ..llm import llm_session, load_prices
from ..llm.chat import DEFAULT_ANTHROPIC_BASE_URL, DEFAULT_BASE_URL, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S
from ..llm.generation import Generation, check_generation, parse_generation
from ..llm.preflight import ModelCheck, judge_check
from ..llm.pricing import price_for
from ..packs import Pack, load_pack
from ..results.summary import RunSummary
from ..run.exit_status import verdict
from ..run.matrix import Cell, CellAgents
from ..run.ray import RaySettings
from ..run.schedule import RunSettings, run_pack
from .config_run import ConfigRun, RecipeMaker, plan_config_run
from .options import isolation_option, option, without_option
from .report import ProgressObserver, cells_table, failures_table, summary_table, tasks_table

__all__ = ["LLMOptions", "judge_model_config", "run_command"]


@click.command("run")
@option(
    "--pack",
    "pack_path",
    default=None,
    type=click.Path(path_type=Path),
    help="The pack root, or its tasks/ folder, or one task folder; or tau2:<domain> (airline, retail, "
    "telecom, mock: docs/tau2.md). Required unless --config.",
)
@option(
    "--config",
    "config_path",
    default=None,
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="A public run_config.yaml: its packs x its agent models as one run (docs/cli.md).",
)
@option(
    "--split",
    default=None,
    metavar="NAME",
    help="With --pack tau2:<domain>: τ²'s task split (base, train, test, full; telecom also small) [default: base].",
)
@option(
    "--agent", type=click.Choice(["golden", "scripted", "llm"]), default="golden", help="Who plays the agent."
)
@option(
    "--trials",
    type=click.IntRange(min=1),
    default=1,
    help="Trials per task (pass^k and pass@k use k = this).",
)
@option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=4,
    help="Trials in flight at once (with --ray: per worker).",
)
@option(
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="Results folder [default: runs/<pack>-<UTC time>].",
)
@option(
    "--runner",
    "runner_address",
    default=None,
    metavar="HOST:PORT",
    help="A running tolokaforge-runner [default: start one in this process].",
)
@option(
    "--runner-token-file",
    type=click.Path(path_type=Path),
    default=None,
    help="The --runner's token file [default: the file a runner on this machine wrote for its port].",
)
@option(
    "--runner-ca",
    type=click.Path(path_type=Path),
    default=None,
    help="Call the --runner over TLS, trusting this CA certificate (PEM).",
)
@option(
    "--ray",
    "ray_address",
    default=None,
    metavar="ADDRESS",
    help="Run the trials on a Ray cluster: 'auto', 'local' (start one here) or HOST:PORT of its head "
    "(needs: pip install 'tolokaforge-host[ray]'; see docs/ray.md).",
)
@option(
    "--ray-workers",
    type=click.IntRange(min=1),
    default=None,
    help="At most this many Ray workers [default: one per CPU of the cluster].",
)
@isolation_option
@without_option
@option(
    "--golden-replay",
    type=click.Choice(["task", "trial"]),
    default="task",
    help="How the embedded runner grades by hash: replay a task's golden path until two trials' replays "
    "agree, then reuse the outcome (task), or replay it for every trial (trial).",
)
@option("--resume", is_flag=True, help="Continue the run in --output (refused if it is not the same run).")
@option(
    "--task",
    "task_ids",
    multiple=True,
    metavar="ID",
    help="Run only the tasks this id or shell glob ('refuse_*') matches (repeatable; tolokaforge list "
    "PACK lists the ids).",
)
@option(
    "--category",
    "categories",
    multiple=True,
    metavar="NAME",
    help="Run only the tasks of this category (repeatable; with --task, tasks matching both).",
)
@option(
    "--script",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="Turns file for --agent scripted.",
)
@option(
    "--model",
    default=None,
    help="Chat model for --agent llm: anthropic/NAME for Anthropic's Messages API, openai/NAME or a bare "
    "name for the OpenAI-compatible --llm-base-url.",
)
@option("--user-model", default=None, help="Chat model for LLM users [default: --model].")
@option(
    "--llm-base-url",
    "--base-url",
    "base_url",
    default=DEFAULT_BASE_URL,
    also_env=("OPENAI_BASE_URL",),
    help="OpenAI-compatible API base URL (key: TOLOKAFORGE_LLM_API_KEY or OPENAI_API_KEY).",
)
@option(
    "--anthropic-base-url",
    default=DEFAULT_ANTHROPIC_BASE_URL,
    also_env=("ANTHROPIC_BASE_URL",),
    help="Where anthropic/ models are served, without /v1 (key: ANTHROPIC_API_KEY).",
)
@option(
    "--gen",
    "gen",
    multiple=True,
    metavar="ROLE.KEY=VALUE",
    help="A generation setting of the agent, user or judge model: temperature, seed, max_tokens or "
    "reasoning_effort (repeatable; e.g. --gen agent.temperature=0 --gen judge.max_tokens=1024).",
)
@option(
    "--llm-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT_S,
    help="Seconds one chat request may take before it is retried or given up.",
)
@option(
    "--llm-max-retries",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_RETRIES,
    help="Retries of a chat request after 429, 5xx or a timeout.",
)
@option(
    "--judge-model",
    default=None,
    help="Chat model of the rubric judge (tasks with llm_judge); tolokaforge-mock-judge needs no network.",
)
@option(
    "--judge-base-url",
    default=None,
    help="The judge's API base URL [default: --llm-base-url]; the runner reads the judge's key from "
    "TOLOKAFORGE_JUDGE_API_KEY, else the agent's.",
)
@option(
    "--prices",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="YAML {model: {prompt, completion}} USD per 1M tokens.",
)
@option(
    "--max-attempts",
    type=click.IntRange(min=1),
    default=3,
    help="Attempts per trial when the runner loses it.",
)
@option("--max-turns", type=click.IntRange(min=1), default=30, help="Turn budget for tasks that set none.")
@option(
    "--fail-under",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Exit 1 when the pass rate (passed / all trials) is below this.",
)
@click.pass_context
def run_command(ctx: click.Context, **params: Any) -> int:
    """Run every task of a pack (or --task ones), grade every trial, write results and a summary."""
    if (params["pack_path"] is None) == (params["config_path"] is None):
        raise ConfigError("give --pack PATH or --config run_config.yaml (one of them)")
    matrix: ConfigRun | None = None
    if params["config_path"] is not None:
        matrix = plan_config_run(ctx, params, _recipe_maker(params))
        pack = matrix.pack
        params.update(
            agent=matrix.agent,
            base_url=matrix.base_url,
            output=matrix.plan.output,
            trials=matrix.plan.trials,
            concurrency=matrix.plan.concurrency,
            max_turns=matrix.plan.max_turns,
            max_attempts=matrix.plan.max_attempts,
            model=", ".join(m.name for m in matrix.plan.agent_models) or None,
            user_model=matrix.plan.user_model.name if matrix.plan.user_model else None,
        )
        if params["ray_address"] is not None:
            raise ConfigError("--ray with --config is not supported: run each pack on Ray with --pack")
    else:
        pack = load_pack(
            params["pack_path"],
            split=params["split"],
            isolation=params["isolation"],
            sandbox_without=params["sandbox_without"],
        )
    output: Path | None = params["output"]
    if output is None:
        if params["resume"]:
            raise ConfigError("--resume needs the --output of the run to continue")
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        output = Path("runs") / f"{pack.name}-{stamp}"
    agent: str = params["agent"]
    generation = parse_generation(params["gen"])
    llm = LLMOptions(
        model=params["model"],
        user_model=params["user_model"],
        base_url=params["base_url"],
        prices=params["prices"],
        timeout_s=params["llm_timeout"],
        max_retries=params["llm_max_retries"],
        generation=generation.get("agent", Generation()),
        user_generation=generation.get("user", Generation()),
        anthropic_base_url=params["anthropic_base_url"],
    )
    if matrix is None:
        _check_generation(agent, llm, pack)
    uses_llm = agent == "llm" or (_wants_llm_user(pack) and bool(llm.user_model or llm.model))
    # run.yaml keys every option by its flag (--llm-base-url -> llm_base_url), as given.
    recorded = {
        _flag_key(param): _recorded(params[str(param.name)])
        for param in ctx.command.params
        if isinstance(param, click.Option)
    }
    recorded["output"] = str(output)
    recorded["gen"] = _generation_recorded(_option_sets(matrix, llm), generation)
    if matrix is not None:
        recorded["cells"] = matrix.cells_recorded()
    if params["ray_workers"] is not None and params["ray_address"] is None:
        raise ConfigError("--ray-workers needs --ray ADDRESS")
    recipe = (
        next(iter(matrix.recipes.values())) if matrix is not None else _recipe_maker(params)(agent, llm, pack)
    )
    settings = RunSettings(
        output=output,
        ray=RaySettings(params["ray_address"], recipe, max_workers=params["ray_workers"])
        if params["ray_address"]
        else None,
        trials=params["trials"],
        concurrency=params["concurrency"],
        runner=params["runner_address"],
        runner_token_file=params["runner_token_file"],
        runner_ca=params["runner_ca"],
        isolation=params["isolation"],
        sandbox_without=tuple(params["sandbox_without"]),
        golden_replay=params["golden_replay"],
        resume=params["resume"],
        task_ids=params["task_ids"],
        categories=params["categories"],
        max_attempts=params["max_attempts"],
        default_max_turns=params["max_turns"],
        models=_models(agent, llm, pack)
        | ({"judge": params["judge_model"]} if params["judge_model"] else {}),
        llm_endpoint=llm.base_url_for(llm.model or llm.user_model or "") if uses_llm else None,
        options=recorded,
        judge_model=judge_model_config(
            params["judge_model"],
            params["judge_base_url"] or llm.base_url_for(params["judge_model"] or ""),
            llm.prices,
            generation.get("judge", Generation()),
        ),
        cells=matrix.cells_recorded() if matrix is not None else {},
    )
    console = Console()
    tune_collector()  # the pack is loaded: it lives as long as the run
    recipes: dict[str | None, AgentRecipe] = matrix.recipes if matrix is not None else {None: recipe}
    settings = replace(settings, model_checks=_model_checks(pack, recipes.values(), settings.judge_model))
    cells = matrix.cells if matrix is not None else None
    summary = asyncio.run(_run(pack, recipes, cells, settings, console))
    console.print(tasks_table(summary))
    if summary.cells:
        console.print(cells_table(summary))
    console.print(summary_table(summary))
    if summary.not_passed():
        console.print(failures_table(summary, settings.output, console.width))
    for skipped in summary.skipped_tasks:
        console.print(f"SKIPPED {skipped['task_id']}: {skipped['reason']}", highlight=False, soft_wrap=True)
    console.print(
        f"results: {settings.output}  (report: tolokaforge report {settings.output})", soft_wrap=True
    )
    result = verdict(summary, params["fail_under"])
    console.print(result.line, highlight=False, soft_wrap=True)
    return result.code


def _check_generation(agent: str, llm: LLMOptions, pack: Pack) -> None:
    if agent == "llm" and llm.model:
        check_generation("agent", llm.model, llm.generation)
    user_model = llm.user_model or llm.model
    if _wants_llm_user(pack) and user_model:
        check_generation("user", user_model, llm.user_generation)


def _option_sets(matrix: ConfigRun | None, llm: LLMOptions) -> list[LLMOptions]:
    """The LLM options each agent model of the run is called with."""
    return [recipe.llm for recipe in matrix.recipes.values()] if matrix is not None else [llm]


def _generation_recorded(
    options: list[LLMOptions], generation: dict[str, Generation]
) -> dict[str, dict[str, Any]]:
    """Per role, the settings sent: run.yaml records them so a resumed run is refused if they change."""
    recorded: dict[str, dict[str, Any]] = {}
    first = options[0]
    if len(options) == 1:
        recorded["agent"] = first.generation.recorded()
    else:
        recorded["agent"] = {str(each.model): each.generation.recorded() for each in options}
    recorded["user"] = first.user_generation.recorded()
    recorded["judge"] = generation.get("judge", Generation()).recorded()
    return {role: settings for role, settings in recorded.items() if settings}


def _flag_key(param: click.Option) -> str:
    flag = next(name for name in param.opts if name.startswith("--"))
    return flag.removeprefix("--").replace("-", "_")


def _recorded(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(cast(tuple[Any, ...], value))
    return value


def _recipe_maker(params: dict[str, Any]) -> RecipeMaker:
    script = load_script(params["script"]) if params["script"] else None

    def make(agent: str, llm: LLMOptions, pack: Pack) -> AgentRecipe:
        return AgentRecipe.of(agent, llm, script, _wants_llm_user(pack))

    return make


def _wants_llm_user(pack: Pack) -> bool:
    return any(t.task.user_simulator and t.task.user_simulator.mode == "llm" for t in pack.tasks)


def _models(agent: str, llm: LLMOptions, pack: Pack) -> dict[str, str | None]:
    models: dict[str, str | None] = {"agent": llm.model if agent == "llm" else None}
    if _wants_llm_user(pack):
        models["user"] = llm.user_model or llm.model
    return models


def _model_checks(
    pack: Pack, recipes: Iterable[AgentRecipe], judge: JudgeModelConfig | None
) -> tuple[ModelCheck, ...]:
    """Every model the run will call, by role, for the preflight (run_pack calls each once first)."""
    checks = [check for recipe in recipes for check in recipe.model_checks()]
    judged = any(loaded.task.grading.llm_judge is not None for loaded in pack.tasks)
    if judged and (check := judge_check(judge)) is not None:
        checks.append(check)
    return tuple(checks)


def judge_model_config(
    model: str | None, base_url: str, prices: Path | None, generation: Generation | None = None
) -> JudgeModelConfig | None:
    """The judge model for the TrialSpec, priced from the run's price table; never its key."""
    if not model:
        return None
    generation = generation or Generation()
    check_generation("judge", model, generation)
    price = price_for(load_prices(prices), model)
    keys = (
        {"api_key_env": ["TOLOKAFORGE_JUDGE_API_KEY", "ANTHROPIC_API_KEY"]}
        if split_model(model)[0] == "anthropic"
        else {}
    )
    try:
        config = JudgeModelConfig(model=model, base_url=base_url, **keys, **generation.recorded())
    except ValidationError as error:
        raise ConfigError(f"--judge-model {model!r}: {describe_validation_error(error)}") from error
    if config.is_mock:
        return config.model_copy(
            update={"price": JudgePrice(prompt_per_million=0.0, completion_per_million=0.0)}
        )
    if price is None:
        return config
    return config.model_copy(
        update={
            "price": JudgePrice(
                prompt_per_million=price.prompt_per_million,
                completion_per_million=price.completion_per_million,
            )
        }
    )


async def _run(
    pack: Pack,
    recipes: dict[str | None, AgentRecipe],
    cells: dict[str, Cell] | None,
    settings: RunSettings,
    console: Console,
) -> RunSummary:
    async with llm_session(settings.concurrency) as session:
        built = {model: recipe.build(session) for model, recipe in recipes.items()}
        recipe = next(iter(recipes.values()))
        agents: AgentFactory
        agents, users = next(iter(built.values()))  # one user model for every cell
        if cells is not None:
            agents = CellAgents(recipe.agent, {model: pair[0] for model, pair in built.items()}, cells)
        with ProgressObserver(console) as progress:
            return await run_pack(pack, agents, users, settings, progress)
