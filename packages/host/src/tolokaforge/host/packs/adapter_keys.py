"""Public-style ``adapter_type`` / ``adapter_settings`` in task.yaml (or pack.yaml ``defaults``).

In the public project a task names the adapter that reads it. This loader is the ``native`` one: a
native task loads here with the same meaning. Every other adapter reads another format with code of
its own, so such a task is refused with where to go instead -- never loaded as if it were native.
The native adapter reads no settings, so ``adapter_settings`` is accepted only empty.
"""

from __future__ import annotations

from pathlib import Path

from .files import TaskFile
from .problems import ProblemLog

__all__ = ["check_adapter_keys"]

_ELSEWHERE = {
    "tau": "τ²-bench domains run as packs built from the installed τ²: --pack tau2:<domain> (docs/tau2.md)",
    "frozen_mcp_core": "it needs the mcp_core runtime (a domain folder of mcp_core tools), which this "
    "harness does not have",
    "tlk_mcp_core": "it needs the mcp_core runtime (a domain folder of mcp_core tools), which this "
    "harness does not have",
    "terminal_bench": "a Terminal-Bench task is its own layout (task.toml, instruction.md, tests/test.sh), "
    "not a task.yaml",
}


def check_adapter_keys(log: ProblemLog, spec: TaskFile, file: Path) -> None:
    adapter = spec.adapter_type
    if adapter is not None and adapter != "native":
        reason = _ELSEWHERE.get(adapter, f"known: native, {', '.join(_ELSEWHERE)}")
        log.add(file, "adapter_type", f"{adapter!r} is not loaded here (only native is): {reason}")
    if spec.adapter_settings:
        keys = ", ".join(sorted(spec.adapter_settings))
        log.add(
            file,
            "adapter_settings",
            f"the native adapter reads no settings, so these would do nothing: {keys}",
        )
