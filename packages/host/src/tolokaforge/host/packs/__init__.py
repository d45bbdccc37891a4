"""Task packs (docs/pack-format.md): the author-facing files, their translation, and the loader.

Layers, each importing only those above it::

    files         strict models of pack.yaml, task.yaml and grading.yaml (both styles)
    problems      stage 1: read YAML, collect every problem with its file and key
    requirements  pack.yaml ``requires`` checked against this environment
    task_parts    stage 2: resolve the files a task names; initial state, prompt, policies, user
    tool_module   a pack's python tools imported in isolation; the code bundle for the runner
    tool_sources  stage 3: the task's tools (python module, MCP server, module-shaped file)
    grading       stage 4: grading.yaml -> the runner-form GradingConfig, refusing ungradeable shapes
    loader        load_pack / inspect_pack: the stages in order, one pass per pack
    terminal/     Terminal-Bench task folders as packs (docs/terminal.md), dispatched to by the loader
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
