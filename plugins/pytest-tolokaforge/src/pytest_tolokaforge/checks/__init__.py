"""The checks, one module each; every check is ``async def check(ctx) -> notes`` or raises CheckFailure.

Per task (:data:`TASK_CHECKS`): ``load``, ``golden``, ``resolve``, ``taxonomy``, ``determinism``.
Once per session (:data:`RUNNER_CHECKS`): the runner's own contract, from runner_contract.py.
Per tool provider (``--tolokaforge-provider``): provider_contract.py's PROVIDER_CHECKS and, per
operation, OPERATION_CHECKS.
A check returns notes -- things it could not judge, or judged only in part -- which the terminal
summary shows beside the verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from ..session import ToloSession
from . import determinism, golden, load, resolve, runner_contract, taxonomy
from .context import TaskContext

__all__ = ["RUNNER_CHECKS", "TASK_CHECKS", "RunnerCheck", "TaskCheck", "TaskContext"]

TaskCheck = Callable[[TaskContext], Coroutine[Any, Any, list[str]]]
RunnerCheck = Callable[[ToloSession], Coroutine[Any, Any, list[str]]]

TASK_CHECKS: dict[str, TaskCheck] = {
    "load": load.check,
    "golden": golden.check,
    "resolve": resolve.check,
    "taxonomy": taxonomy.check,
    "determinism": determinism.check,
}
RUNNER_CHECKS: dict[str, RunnerCheck] = runner_contract.CHECKS
