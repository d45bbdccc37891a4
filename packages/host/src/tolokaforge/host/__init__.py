"""Tolokaforge host: load a task pack, drive agents through a runner, grade, write results.

The CLI is ``tolokaforge`` (:mod:`tolokaforge.host.cli`); the Python API is :func:`evaluate` and
:func:`aevaluate` (:mod:`tolokaforge.host.api`, docs/python-api.md), over the library entry points
:func:`load_pack` and :func:`run_pack`. The rest of ``__all__`` is what the pytest plugin and the
benchmarks drive a trial with (a runner client, the TrialSpec builder, the golden agent, one episode,
the chat client), the run's exit verdict, the HTML report, and a Ray run's settings (``RaySettings``, ``AgentRecipe``);
other packages import from here only (``lint-imports`` enforces it).

The names load on first use (PEP 562): a process that needs one module of the package (the
result-file helper, a Ray worker, a test) does not pay for importing all of it, aiohttp and the
runner included.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tolokaforge.core.runner_api import RegisteredTrial, Runner

    from .agents import GoldenAgentFactory
    from .agents.golden import resolve_tool_name
    from .agents.setup import AgentRecipe, LLMOptions
    from .api import EvaluationResult, TrialResult, aevaluate, evaluate
    from .errors import AgentError, HostError, PackLoadError, PackProblem
    from .html_report import write_report
    from .llm import DEFAULT_PRICES, ChatClient, ChatSettings, llm_session
    from .llm.openai_format import agent_view, proposed_calls, tool_specs
    from .packs import LoadedTask, Pack, PackReport, inspect_pack, load_pack
    from .packs.tau2 import tau2_task
    from .results.outcome import Episode, TrialOutcome
    from .results.summary import RunSummary
    from .results.tau2_export import export_tau2_results
    from .results.trial_files import configured_components, grade_to_dict
    from .run.conductor import TrialSettings, run_trial
    from .run.episode import run_episode
    from .run.exit_status import Verdict, verdict
    from .run.ray import RaySettings, ray_api, ray_connection
    from .run.recorder import RunRecorder
    from .run.schedule import RunSettings, run_pack
    from .run.trial_spec import build_trial_spec
    from .runner import GrpcRunner, open_runner, parse_address
    from .runner.task_wire import register_request
    from .turns import AgentTurn, ProposedCall
    from .users.base import UserSimulatorFactory
    from .users.router import UserRouter

__all__ = [
    "DEFAULT_PRICES",
    "AgentError",
    "AgentRecipe",
    "AgentTurn",
    "ChatClient",
    "ChatSettings",
    "Episode",
    "EvaluationResult",
    "GoldenAgentFactory",
    "GrpcRunner",
    "HostError",
    "LLMOptions",
    "LoadedTask",
    "Pack",
    "PackLoadError",
    "PackProblem",
    "PackReport",
    "ProposedCall",
    "RaySettings",
    "RegisteredTrial",
    "RunRecorder",
    "RunSettings",
    "RunSummary",
    "Runner",
    "TrialOutcome",
    "TrialResult",
    "TrialSettings",
    "UserRouter",
    "UserSimulatorFactory",
    "Verdict",
    "aevaluate",
    "agent_view",
    "build_trial_spec",
    "configured_components",
    "evaluate",
    "export_tau2_results",
    "grade_to_dict",
    "inspect_pack",
    "llm_session",
    "load_pack",
    "open_runner",
    "parse_address",
    "proposed_calls",
    "ray_api",
    "ray_connection",
    "register_request",
    "resolve_tool_name",
    "run_episode",
    "run_pack",
    "run_trial",
    "tau2_task",
    "tool_specs",
    "verdict",
    "write_report",
]

_HOMES: dict[str, str] = {
    "AgentError": ".errors",
    "AgentRecipe": ".agents.setup",
    "AgentTurn": ".turns",
    "ChatClient": ".llm",
    "ChatSettings": ".llm",
    "DEFAULT_PRICES": ".llm",
    "Episode": ".results.outcome",
    "EvaluationResult": ".api",
    "GoldenAgentFactory": ".agents",
    "GrpcRunner": ".runner",
    "HostError": ".errors",
    "LLMOptions": ".agents.setup",
    "LoadedTask": ".packs",
    "Pack": ".packs",
    "PackLoadError": ".errors",
    "PackProblem": ".errors",
    "PackReport": ".packs",
    "ProposedCall": ".turns",
    "RaySettings": ".run.ray",
    "RegisteredTrial": "tolokaforge.core.runner_api",
    "RunRecorder": ".run.recorder",
    "RunSettings": ".run.schedule",
    "RunSummary": ".results.summary",
    "Runner": "tolokaforge.core.runner_api",
    "TrialOutcome": ".results.outcome",
    "TrialResult": ".api",
    "TrialSettings": ".run.conductor",
    "UserRouter": ".users.router",
    "UserSimulatorFactory": ".users.base",
    "Verdict": ".run.exit_status",
    "aevaluate": ".api",
    "agent_view": ".llm.openai_format",
    "build_trial_spec": ".run.trial_spec",
    "configured_components": ".results.trial_files",
    "evaluate": ".api",
    "export_tau2_results": ".results.tau2_export",
    "grade_to_dict": ".results.trial_files",
    "inspect_pack": ".packs",
    "llm_session": ".llm",
    "load_pack": ".packs",
    "open_runner": ".runner",
    "parse_address": ".runner",
    "proposed_calls": ".llm.openai_format",
    "ray_api": ".run.ray",
    "ray_connection": ".run.ray",
    "register_request": ".runner.task_wire",
    "resolve_tool_name": ".agents.golden",
    "run_episode": ".run.episode",
    "run_pack": ".run.schedule",
    "run_trial": ".run.conductor",
    "tau2_task": ".packs.tau2",
    "tool_specs": ".llm.openai_format",
    "verdict": ".run.exit_status",
    "write_report": ".html_report",
}
"""Where each public name is defined: imported from there the first time it is asked for."""


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
