"""τ²'s own prompt texts, read from the installed τ² without importing the modules that hold them.

τ²'s agent and user-simulator modules import litellm (seconds of import time, and a network fetch of
its price list); the prompts are plain string constants and files, so they are read from the
installed source instead: the same text τ²'s runner sends, none of it kept in this repository.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import cache
from pathlib import Path

__all__ = ["agent_system_prompt", "user_system_prompt"]


@cache
def _constants(module: str) -> dict[str, str]:
    """The module-level string constants of τ² module ``module``, read from its installed source."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"{module} is not installed (pip install 'tolokaforge-host[tau2]')")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            # τ² writes its prompts as """...""".strip()
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr == "strip"
                and not value.args
            ):
                value = value.func.value
                stripped = True
            else:
                stripped = False
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                text = value.value
                found[node.targets[0].id] = text.strip() if stripped else text
    return found


def _data_dir() -> Path:
    spec = importlib.util.find_spec("tau2")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("tau2 is not installed (pip install 'tolokaforge-host[tau2]')")
    return Path(spec.origin).parent / "data"


def agent_system_prompt(policy: str) -> str:
    """The system prompt τ²'s LLM agent gets for a domain with ``policy``."""
    texts = _constants("tau2.agent.llm_agent")
    return texts["SYSTEM_PROMPT"].format(agent_instruction=texts["AGENT_INSTRUCTION"], domain_policy=policy)


@cache
def _guidelines(use_tools: bool) -> str:
    name = "simulation_guidelines_tools.md" if use_tools else "simulation_guidelines.md"
    return (_data_dir() / "tau2" / "user_simulator" / name).read_text(encoding="utf-8")


def user_system_prompt(scenario: str, *, use_tools: bool) -> str:
    """The system prompt τ²'s user simulator gets for ``scenario`` (its task's ``str(user_scenario)``)."""
    template = _constants("tau2.user.user_simulator")["SYSTEM_PROMPT"]
    return template.format(global_user_sim_guidelines=_guidelines(use_tools), instructions=scenario)
