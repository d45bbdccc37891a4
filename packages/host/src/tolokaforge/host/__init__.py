"""Tolokaforge host: load a task pack, drive agents through a runner, grade, write results.

The CLI is ``tolokaforge`` (:mod:`tolokaforge.host.cli`); the library entry points are
:func:`load_pack` and :func:`run_pack`. The rest of ``__all__`` is what the pytest plugin and the
benchmarks drive a trial with (a runner client, the TrialSpec builder, the golden agent, one episode,
the chat client), the run's exit verdict, the HTML report, and a Ray run's settings (``RaySettings``, ``AgentRecipe``);
other packages import from here only (``lint-imports`` enforces it).
"""

from __future__ import annotations

from .agent_setup import AgentRecipe, LLMOptions
from .agents import GoldenAgentFactory
from .episode import Episode, run_episode
from .errors import HostError, PackLoadError, PackProblem
from .exit_status import Verdict, verdict
from .html_report import write_report
from .llm import DEFAULT_PRICES, ChatClient, ChatSettings, llm_session
from .packs import LoadedTask, Pack, PackReport, inspect_pack, load_pack
from .ray_backend import RaySettings, ray_connection
from .run import RunSettings, run_pack
from .runner_client import RegisteredTrial, RunnerClient, open_runner, parse_address
from .summary import RunSummary
from .trial_spec import build_trial_spec, register_request
from .users.router import UserRouter

__all__ = [
    "DEFAULT_PRICES",
    "AgentRecipe",
    "ChatClient",
    "ChatSettings",
    "Episode",
    "GoldenAgentFactory",
    "HostError",
    "LLMOptions",
    "LoadedTask",
    "Pack",
    "PackLoadError",
    "PackProblem",
    "PackReport",
    "RaySettings",
    "RegisteredTrial",
    "RunSettings",
    "RunSummary",
    "RunnerClient",
    "UserRouter",
    "Verdict",
    "build_trial_spec",
    "inspect_pack",
    "llm_session",
    "load_pack",
    "open_runner",
    "parse_address",
    "ray_connection",
    "register_request",
    "run_episode",
    "run_pack",
    "verdict",
    "write_report",
]
