"""A trial's workspace files: seeded from the task's code at registration and again on ResetTrial.

``initial_state.workspace_files`` maps a workspace path to a file of the task's code bundle. Seeding
empties the workspace first, so a reset undoes whatever the trial's tools wrote there.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from ..errors import RegistrationError

__all__ = ["seed_workspace"]


def seed_workspace(
    workspace: Path, code_root: Path | None, files: Mapping[str, str], *, clear: bool = True
) -> None:
    """Copy ``files`` into ``workspace``, emptied first unless ``clear`` is False (a new, empty one)."""
    if clear:
        for child in workspace.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    if not files:
        return
    if code_root is None:
        raise RegistrationError("initial_state.workspace_files names files, but the task ships no code")
    root = code_root.resolve()
    for target, source in files.items():
        origin = (root / source).resolve()
        if not origin.is_relative_to(root) or not origin.is_file():
            raise RegistrationError(
                f"initial_state.workspace_files: {source!r} is not a file of the task's code"
            )
        destination = workspace / target
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(origin, destination)
