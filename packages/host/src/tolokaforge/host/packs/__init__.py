"""Task packs: the author-facing files, their translation, and the loader that reports every problem.

Layers, each importing only those above it::

    files         strict models of pack.yaml, task.yaml and grading.yaml
    grading       grading.yaml -> the runner-form GradingConfig
    tool_module   the pack's python tools imported in isolation; the code bundle for the runner
    loader        load_pack: a Pack of TaskDescriptions, or PackLoadError naming file and key
"""

from __future__ import annotations

from .loader import LoadedTask, Pack, load_pack, resolve_pack_root

__all__ = ["LoadedTask", "Pack", "load_pack", "resolve_pack_root"]
