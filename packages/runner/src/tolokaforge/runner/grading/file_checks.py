"""File checks: assertions over the trial's workspace files (grading.yaml ``path_glob`` checks).

Evaluated before the golden replay, which may write files of its own into the same workspace.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tolokaforge.core.models import FileCheck

from .component import ComponentResult

__all__ = ["evaluate_file_checks"]


def evaluate_file_checks(checks: Sequence[FileCheck], workspace: Path | None) -> ComponentResult:
    """Score = the fraction of checks that hold; the segment names every failing one."""
    failures: list[str] = []
    for check in checks:
        why = _failure(check, workspace)
        if why is not None:
            failures.append(f"{check.description or check.path_glob}: {why}")
    passed = len(checks) - len(failures)
    score = passed / len(checks) if checks else 1.0
    if failures:
        segment = f"Files: {passed}/{len(checks)} checks passed; " + "; ".join(failures)
    else:
        segment = f"Files: all {len(checks)} checks passed"
    return ComponentResult("files", score, segment, extra={"file_checks": (passed, len(checks))})


def _failure(check: FileCheck, workspace: Path | None) -> str | None:
    matches = _matching(check.path_glob, workspace)
    if check.operator == "exists":
        if bool(matches) == check.exists:
            return None
        return f"expected {'a' if check.exists else 'no'} file matching {check.path_glob!r}"
    if not matches:
        return f"no file matches {check.path_glob!r}"
    texts = [path.read_text(encoding="utf-8", errors="replace") for path in matches]
    if check.operator == "contains" and check.contains is not None:
        ok = any(check.contains in text for text in texts)
    elif check.operator == "contains_ci" and check.contains_ci is not None:
        ok = any(check.contains_ci.casefold() in text.casefold() for text in texts)
    else:
        ok = any(text == check.equals for text in texts)
    return (
        None
        if ok
        else f"{check.operator} {getattr(check, check.operator)!r} holds in none of {len(matches)} file(s)"
    )


def _matching(pattern: str, workspace: Path | None) -> list[Path]:
    if workspace is None or not workspace.is_dir():
        return []
    root = workspace.resolve()
    found = [p for p in sorted(workspace.glob(pattern)) if p.is_file()]
    # A link out of the workspace is not the trial's file.
    return [p for p in found if p.resolve().is_relative_to(root)]
