"""``tolokaforge run``: run a pack with an agent, on the embedded runner or a remote one."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import click
from pydantic import ValidationError
from rich.console import Console

from tolokaforge.core.models import JudgeModelConfig, JudgePrice, describe_validation_error

from ..agents import GoldenAgentFactory, LLMAgentFactory, ScriptedAgentFactory, load_script
from ..agents.base import AgentFactory
from ..errors import ConfigError
from ..llm import ChatClient, ChatSettings, api_key_from_env, load_prices
from ..llm.pricing import price_for
from ..packs import Pack, load_pack
from ..run import RunSettings, run_pack
from ..summary import RunSummary
from ..users import LLMUserFactory
from ..users.router import UserRouter
from .report import ProgressObserver, summary_table

__all__ = ["LLMOptions", "judge_model_config", "run_command"]


@dataclass(frozen=True)
class LLMOptions:
    model: str | None
    user_model: str | None
    base_url: str
    prices: Path | None


@click.command("run")
@click.option("--pack", "pack_path", required=True, type=click.Path(path_type=Path), envvar="TOLOKAFORGE_PACK",
              show_envvar=True, help="The pack root, or its tasks/ folder.")  # fmt: skip
@click.option("--agent", type=click.Choice(["golden", "scripted", "llm"]), default="golden",
              envvar="TOLOKAFORGE_AGENT", show_envvar=True, help="Who plays the agent.")  # fmt: skip
@click.option("--trials", type=click.IntRange(min=1), default=1, envvar="TOLOKAFORGE_TRIALS", show_envvar=True,
              help="Trials per task (pass^k uses k = this).")  # fmt: skip
@click.option("--concurrency", type=click.IntRange(min=1), default=4, envvar="TOLOKAFORGE_CONCURRENCY",
              show_envvar=True, help="Trials in flight at once.")  # fmt: skip
@click.option("--output", type=click.Path(path_type=Path), default=None, envvar="TOLOKAFORGE_OUTPUT",
              show_envvar=True, help="Results folder [default: runs/<pack>-<UTC time>].")  # fmt: skip
@click.option("--runner", "runner_address", default=None, metavar="HOST:PORT", envvar="TOLOKAFORGE_RUNNER",
              show_envvar=True, help="A running tolokaforge-runner [default: start one in this process].")  # fmt: skip
@click.option("--resume", is_flag=True, envvar="TOLOKAFORGE_RESUME", show_envvar=True,
              help="Skip trials whose results exist in --output.")  # fmt: skip
@click.option("--task", "task_ids", multiple=True, metavar="ID", envvar="TOLOKAFORGE_TASK", show_envvar=True,
              help="Run only this task (repeatable).")  # fmt: skip
@click.option("--script", type=click.Path(path_type=Path, exists=True, dir_okay=False), default=None,
              envvar="TOLOKAFORGE_SCRIPT", show_envvar=True, help="Turns file for --agent scripted.")  # fmt: skip
@click.option("--model", default=None, envvar="TOLOKAFORGE_MODEL", show_envvar=True,
              help="Chat model for --agent llm.")  # fmt: skip
@click.option("--user-model", default=None, envvar="TOLOKAFORGE_USER_MODEL", show_envvar=True,
              help="Chat model for LLM users [default: --model].")  # fmt: skip
@click.option("--base-url", default="https://api.openai.com/v1", envvar="TOLOKAFORGE_LLM_BASE_URL",
              show_envvar=True, help="OpenAI-compatible API base URL (key: TOLOKAFORGE_LLM_API_KEY or OPENAI_API_KEY).")  # fmt: skip
@click.option("--judge-model", default=None, envvar="TOLOKAFORGE_JUDGE_MODEL", show_envvar=True,
              help="Chat model of the rubric judge (tasks with llm_judge); tolokaforge-mock-judge needs no network.")  # fmt: skip
@click.option("--judge-base-url", default=None, envvar="TOLOKAFORGE_JUDGE_BASE_URL", show_envvar=True,
              help="The judge's API base URL [default: --base-url]; the runner reads its key from "
                   "TOLOKAFORGE_JUDGE_API_KEY, else the agent's.")  # fmt: skip
@click.option("--prices", type=click.Path(path_type=Path, exists=True, dir_okay=False), default=None,
              envvar="TOLOKAFORGE_PRICES", show_envvar=True, help="YAML {model: {prompt, completion}} USD per 1M tokens.")  # fmt: skip
@click.option("--max-attempts", type=click.IntRange(min=1), default=3, envvar="TOLOKAFORGE_MAX_ATTEMPTS",
              show_envvar=True, help="Attempts per trial when the runner loses it.")  # fmt: skip
@click.option("--max-turns", type=click.IntRange(min=1), default=30, envvar="TOLOKAFORGE_MAX_TURNS",
              show_envvar=True, help="Turn budget for tasks that set none.")  # fmt: skip
def run_command(
    pack_path: Path,
    agent: str,
    trials: int,
    concurrency: int,
    output: Path | None,
    runner_address: str | None,
    resume: bool,
    task_ids: tuple[str, ...],
    script: Path | None,
    model: str | None,
    user_model: str | None,
    base_url: str,
    judge_model: str | None,
    judge_base_url: str | None,
    prices: Path | None,
    max_attempts: int,
    max_turns: int,
) -> None:
    """Run every task of a pack (or --task ones), grade every trial, write results and a summary."""
    pack = load_pack(pack_path)
    if output is None:
        if resume:
            raise ConfigError("--resume needs the --output of the run to continue")
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        output = Path("runs") / f"{pack.name}-{stamp}"
    settings = RunSettings(
        output=output,
        trials=trials,
        concurrency=concurrency,
        runner=runner_address,
        resume=resume,
        task_ids=task_ids,
        max_attempts=max_attempts,
        default_max_turns=max_turns,
        judge_model=judge_model_config(judge_model, judge_base_url or base_url, prices),
    )
    llm = LLMOptions(model=model, user_model=user_model, base_url=base_url, prices=prices)
    console = Console()
    summary = asyncio.run(_run(pack, agent, script, llm, settings, console))
    console.print(summary_table(summary))
    console.print(f"results: {settings.output}")


def judge_model_config(model: str | None, base_url: str, prices: Path | None) -> JudgeModelConfig | None:
    """The judge model for the TrialSpec, priced from the run's price table; never its key."""
    if not model:
        return None
    price = price_for(load_prices(prices), model)
    try:
        config = JudgeModelConfig(model=model, base_url=base_url)
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


def _chat(model: str, llm: LLMOptions, session: aiohttp.ClientSession) -> ChatClient:
    settings = ChatSettings(model=model, base_url=llm.base_url, api_key=api_key_from_env())
    return ChatClient(settings, session, load_prices(llm.prices))


async def _run(
    pack: Pack, agent: str, script: Path | None, llm: LLMOptions, settings: RunSettings, console: Console
) -> RunSummary:
    wants_llm_user = any(t.task.user_simulator and t.task.user_simulator.mode == "llm" for t in pack.tasks)
    user_model = llm.user_model or llm.model
    async with aiohttp.ClientSession() as session:
        agents: AgentFactory
        if agent == "golden":
            agents = GoldenAgentFactory()
        elif agent == "scripted":
            if script is None:
                raise ConfigError("--agent scripted needs --script FILE")
            agents = ScriptedAgentFactory(load_script(script))
        else:
            if not llm.model:
                raise ConfigError("--agent llm needs --model (or TOLOKAFORGE_MODEL)")
            agents = LLMAgentFactory(_chat(llm.model, llm, session))
        users = UserRouter(
            llm=LLMUserFactory(_chat(user_model, llm, session)) if wants_llm_user and user_model else None
        )
        with ProgressObserver(console) as progress:
            return await run_pack(pack, agents, users, settings, progress)
