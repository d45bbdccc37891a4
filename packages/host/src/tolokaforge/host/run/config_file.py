"""The public project's ``run_config.yaml``, read strictly into what ``tolokaforge run`` does here.

A key either maps onto a run setting with the same meaning or is refused with its dotted path and the
reason; nothing is ignored. Absent keys take the public defaults (``repeats`` 5, ``workers`` 8,
``max_turns`` 50, ``temperature`` 0.0), so a public config runs as many trials as it would there.
docs/cli.md lists every key and what it becomes.

One extension: ``models.agent`` may be a list of model blocks, to compare several agents on the same
packs in one run (the public schema has one agent model per config).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tolokaforge.core.models import describe_validation_error

from ..errors import ConfigError
from ..llm.generation import REASONING_EFFORTS, Generation

__all__ = ["OPENROUTER_BASE_URL", "ConfigModel", "RunConfigPlan", "read_run_config"]

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
_PROVIDERS = ("openai", "openrouter", "anthropic")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _ModelBlock(_Strict):
    provider: str
    name: str = Field(min_length=1)
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    reasoning: str = "off"
    top_p: float | None = None


class _Models(_Strict):
    agent: _ModelBlock | list[_ModelBlock] | None = None
    user: _ModelBlock | None = None
    judge: _ModelBlock | None = None


class _Timeouts(_Strict):
    turn_s: int | None = None
    episode_s: int | None = None


class _Orchestrator(_Strict):
    workers: int = Field(default=8, ge=1)
    repeats: int = Field(default=5, ge=1)
    max_turns: int = Field(default=50, ge=1)
    max_attempt_retries: int = Field(default=0, ge=0)
    queue_backend: Literal["sqlite", "postgres"] = "sqlite"
    queue_postgres_dsn: str | None = None
    max_budget_usd: float | None = None
    max_requests_per_second: float | None = None
    timeouts: _Timeouts | None = None
    auto_start_services: bool | None = None
    continue_prompt: str | None = None
    stuck_heuristics: dict[str, Any] | None = None
    runtime: str | None = None
    typesense: dict[str, Any] | None = None


class _Adapter(_Strict):
    type: str = "native"
    params: dict[str, Any] = {}


class _Evaluation(_Strict):
    tasks_glob: str = "**/task.yaml"
    task_packs: list[str] = Field(min_length=1)
    output_dir: str = Field(min_length=1)
    cache_images: bool | None = None
    harness_adapter: _Adapter | None = None


class _RunConfigFile(_Strict):
    models: _Models
    orchestrator: _Orchestrator = Field(default_factory=_Orchestrator)
    evaluation: _Evaluation


_NO_MEANING_HERE: dict[str, str] = {
    "orchestrator.queue_postgres_dsn": "the run's queue is in-process here; its progress is the results "
    "folder (--resume continues it)",
    "orchestrator.max_budget_usd": "there is no spending cap here; the summary reports the cost",
    "orchestrator.max_requests_per_second": "there is no request throttle here; --concurrency bounds the "
    "requests in flight",
    "orchestrator.timeouts": "there is no per-turn or per-episode wall-clock limit here; --llm-timeout "
    "bounds one model request",
    "orchestrator.auto_start_services": "there are no Docker services to start: the runner is embedded "
    "(or --runner)",
    "orchestrator.continue_prompt": "the host never prompts the agent to continue",
    "orchestrator.stuck_heuristics": "there is no stuck detection here; max_turns bounds an episode",
    "orchestrator.runtime": "there is no Docker runtime here: pack code runs in the OS sandbox (--isolation)",
    "orchestrator.typesense": "a run config does not configure Typesense here: set TOLOKAFORGE_TYPESENSE_URL "
    "and TYPESENSE_API_KEY instead (docs/pack-format.md, search_kb)",
    "evaluation.cache_images": "there are no container images here",
    "models.judge": "the rubric judge is a run option: pass --judge-model M (docs/judge.md)",
}


@dataclass(frozen=True)
class ConfigModel:
    """One model of the config, named as ``--model`` takes it, and its generation settings."""

    name: str
    """``anthropic/<name>`` for provider anthropic; ``openai/<name>`` for openrouter (OpenAI-compatible,
    so a router's ``anthropic/...`` names stay the router's); the name as given for openai."""
    generation: Generation

    @property
    def temperature(self) -> float | None:
        return self.generation.temperature


def _config_model(block: _ModelBlock) -> ConfigModel:
    prefix = {"anthropic": "anthropic/", "openrouter": "openai/"}.get(block.provider, "")
    reasoning = block.reasoning.strip().lower()
    return ConfigModel(
        prefix + block.name,
        Generation(
            temperature=block.temperature,
            seed=block.seed,
            max_tokens=block.max_tokens,
            reasoning_effort=None if reasoning in ("off", "") else reasoning,
        ),
    )


@dataclass(frozen=True)
class RunConfigPlan:
    """What a run_config.yaml asks for, in this harness's terms."""

    packs: tuple[Path, ...]
    tasks_glob: str
    output: Path
    agent_models: tuple[ConfigModel, ...]
    """Empty when the config names no agent model (a golden or scripted run)."""
    user_model: ConfigModel | None
    provider: str | None
    """The OpenAI-compatible provider the models name (openai or openrouter), if any."""
    trials: int
    concurrency: int
    max_turns: int
    max_attempts: int

    @property
    def base_url(self) -> str | None:
        """The endpoint the provider implies, when it implies one (OpenRouter); else the run's own."""
        return OPENROUTER_BASE_URL if self.provider == "openrouter" else None


def read_run_config(path: Path) -> RunConfigPlan:
    """Read and check ``path``; a ConfigError names every key that is wrong or has no meaning here."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"--config {path}: cannot read it: {error}") from error
    if not isinstance(raw, dict):
        raise ConfigError(f"--config {path}: must be a mapping with models, orchestrator and evaluation")
    try:
        config = _RunConfigFile.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(f"--config {path}: {describe_validation_error(error)}") from error
    problems = _refusals(config, cast(dict[str, Any], raw))
    agents = _as_list(config.models.agent)
    blocks = [
        (f"models.agent[{i}]" if isinstance(config.models.agent, list) else "models.agent", b)
        for i, b in enumerate(agents)
    ]
    if config.models.user is not None:
        blocks.append(("models.user", config.models.user))
    for where, block in blocks:
        problems.extend(_model_problems(where, block))
    providers = sorted({block.provider for _, block in blocks})
    # Anthropic's models have their own endpoint; openai and openrouter would share --llm-base-url.
    compatible = [provider for provider in providers if provider != "anthropic"]
    if len(compatible) > 1:
        problems.append(
            f"models: one run talks to one OpenAI-compatible endpoint, but the models name {', '.join(compatible)}"
        )
    names = [block.name for block in agents]
    if len(set(names)) != len(names):
        problems.append("models.agent: a model is named twice")
    if problems:
        raise ConfigError(f"--config {path}: " + "; ".join(problems))
    orchestrator = config.orchestrator
    return RunConfigPlan(
        packs=tuple(Path(pack) for pack in config.evaluation.task_packs),
        tasks_glob=config.evaluation.tasks_glob,
        output=Path(config.evaluation.output_dir),
        agent_models=tuple(_config_model(b) for b in agents),
        user_model=_config_model(config.models.user) if config.models.user else None,
        provider=compatible[0] if compatible else None,
        trials=orchestrator.repeats,
        concurrency=orchestrator.workers,
        max_turns=orchestrator.max_turns,
        max_attempts=orchestrator.max_attempt_retries + 1,
    )


def _as_list(agent: _ModelBlock | list[_ModelBlock] | None) -> list[_ModelBlock]:
    if agent is None:
        return []
    return agent if isinstance(agent, list) else [agent]


def _refusals(config: _RunConfigFile, raw: dict[str, Any]) -> list[str]:
    """Every key given that has no meaning here, by its dotted path, with why."""
    problems: list[str] = []
    for dotted, reason in _NO_MEANING_HERE.items():
        if _given(raw, dotted):
            problems.append(f"{dotted}: not supported: {reason}")
    if config.orchestrator.queue_backend == "postgres":
        problems.append(
            "orchestrator.queue_backend: 'postgres' is not supported: the run's queue is in-process and its "
            "progress is the results folder ('sqlite', the local durable queue, means that here)"
        )
    adapter = config.evaluation.harness_adapter
    if adapter is not None and adapter.type != "native":
        problems.append(
            f"evaluation.harness_adapter.type: {adapter.type!r} is not supported: packs load with the native "
            "loader (τ²-bench: --pack tau2:<domain>)"
        )
    if adapter is not None and adapter.params:
        problems.append(
            f"evaluation.harness_adapter.params: the native loader reads none ({', '.join(sorted(adapter.params))}); "
            "tasks_glob and task_packs belong under evaluation"
        )
    glob = config.evaluation.tasks_glob
    if Path(glob).is_absolute() or ".." in Path(glob).parts:
        problems.append(f"evaluation.tasks_glob: {glob!r} must be relative to each pack (no '..')")
    return problems


def _given(raw: dict[str, Any], dotted: str) -> bool:
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = cast(dict[str, Any], node)[part]
    return node is not None


def _model_problems(where: str, block: _ModelBlock) -> list[str]:
    problems: list[str] = []
    if block.provider not in _PROVIDERS:
        problems.append(
            f"{where}.provider: {block.provider!r} is not supported: models are reached over an "
            f"OpenAI-compatible endpoint or Anthropic's Messages API ({', '.join(_PROVIDERS)})"
        )
    if block.top_p is not None:
        problems.append(f"{where}.top_p: not supported: the chat client sends no top_p")
    reasoning = block.reasoning.strip().lower()
    if reasoning not in ("off", "", *REASONING_EFFORTS):
        problems.append(
            f"{where}.reasoning: {block.reasoning!r} is not supported: off or one of {', '.join(REASONING_EFFORTS)}"
        )
    elif block.provider == "anthropic" and reasoning not in ("off", ""):
        problems.append(
            f"{where}.reasoning: not supported for provider anthropic: this harness sends Anthropic no "
            "reasoning effort (set 'off')"
        )
    if block.provider == "anthropic" and block.seed is not None:
        problems.append(f"{where}.seed: not supported for provider anthropic: the Messages API has no seed")
    if block.max_tokens is not None and block.max_tokens <= 0:
        problems.append(f"{where}.max_tokens: must be > 0")
    return problems
