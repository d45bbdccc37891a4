"""Public-style ``initial_state.workspace: {files: [{path, content}]}``: workspace files written inline.

The runner seeds a trial's workspace (and puts it back on ResetTrial) from files of the task's code
bundle, by ``InitialState.workspace_files`` (workspace path -> bundle path). An inline file has no pack
file behind it, so it is added to the task's own copy of the bundle under ``INLINE_ROOT`` -- a hidden
folder, which a pack's own files can never occupy (hidden folders stay out of the bundle) -- and seeded
from there like any other.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from tolokaforge.core.models import ToolCode

from .files import InlineWorkspaceFile, TaskFile
from .problems import ProblemLog
from .task_parts import AGENT_VISIBLE

__all__ = ["INLINE_ROOT", "inline_workspace_files", "with_inline_files"]

INLINE_ROOT = ".inline-workspace"
"""Where a task's inline files live in its code bundle: ``<INLINE_ROOT>/<task_id>/<path>``."""


def inline_workspace_files(log: ProblemLog, spec: TaskFile, file: Path) -> dict[str, str]:
    """Workspace path -> text, for each ``initial_state.workspace.files`` entry; bad entries are logged."""
    block = spec.initial_state.workspace
    if not isinstance(block, InlineWorkspaceFile):
        return {}
    files: dict[str, str] = {}
    for index, entry in enumerate(block.files):
        key = f"initial_state.workspace.files[{index}].path"
        target = entry.path.removeprefix(AGENT_VISIBLE)
        parts = PurePosixPath(target).parts
        if not target or target.startswith("/") or ".." in parts or target.endswith("/"):
            log.add(file, key, f"{entry.path!r} must name a file in the workspace ({AGENT_VISIBLE}...)")
        elif target in files:
            log.add(file, key, f"{entry.path!r} is given twice")
        else:
            files[PurePosixPath(target).as_posix()] = entry.content
    if files and spec.initial_state.filesystem is not None:
        clashes = [
            copy.to
            for copy in spec.initial_state.filesystem.copy_
            if copy.to.removeprefix(AGENT_VISIBLE) in files
        ]
        for clash in clashes:
            log.add(file, "initial_state.workspace.files", f"{clash!r} is also written by filesystem.copy")
    return files


def with_inline_files(code: ToolCode, task_id: str, files: dict[str, str]) -> tuple[ToolCode, dict[str, str]]:
    """The task's bundle with its inline files added, and workspace path -> bundle path for each."""
    sources = {target: f"{INLINE_ROOT}/{task_id}/{target}" for target in files}
    bundled = dict(code.files or {})
    bundled.update({sources[target]: text for target, text in files.items()})
    return ToolCode(files=bundled), sources
