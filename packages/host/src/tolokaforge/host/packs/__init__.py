"""Task packs: the author-facing files, their translation, and the loader that reports every problem.

Layers, each importing only those above it::

    files         strict models of pack.yaml, task.yaml and grading.yaml
    grading       grading.yaml -> the runner-form GradingConfig
    tool_module   the pack's python tools imported in isolation; the code bundle for the runner
    loader        load_pack: a Pack of TaskDescriptions, or PackLoadError naming file and key;
                  inspect_pack: the tasks that load plus, per task that does not, its problems
"""

from __future__ import annotations

from .loader import BrokenTask, LoadedTask, Pack, PackReport, inspect_pack, load_pack, resolve_pack_root

__all__ = [
    "BrokenTask",
    "LoadedTask",
    "Pack",
    "PackReport",
    "inspect_pack",
    "load_pack",
    "resolve_pack_root",
]
