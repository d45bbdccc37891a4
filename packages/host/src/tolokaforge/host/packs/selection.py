"""Which tasks of a pack a run takes: ``--task`` ids or shell globs, ``--category`` names, and the
"did you mean" hint for a name that matches nothing."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from ..errors import ConfigError
from .pack import LoadedTask, Pack
from .tau2.source import DOMAINS, TAU2_PREFIX

__all__ = ["did_you_mean", "path_hint", "select_tasks", "task_categories"]

_GLOB_CHARS = frozenset("*?[")


def did_you_mean(word: str, candidates: Iterable[str], *, limit: int = 3) -> str:
    """`` (did you mean: a, b?)`` for the candidates close to ``word``; empty when none is."""
    close = difflib.get_close_matches(word, list(dict.fromkeys(candidates)), n=limit, cutoff=0.6)
    return f" (did you mean: {', '.join(close)}?)" if close else ""


def path_hint(path: Path) -> str:
    """The hint for a ``--pack`` path that is not a folder: close folder names beside it, or the
    ``tau2:`` domain its last part is close to."""
    parent = path.parent
    siblings = sorted(child.name for child in parent.iterdir() if child.is_dir()) if parent.is_dir() else []
    close = [str(parent / name) for name in difflib.get_close_matches(path.name, siblings, n=3, cutoff=0.6)]
    if not close:
        close = [TAU2_PREFIX + d for d in difflib.get_close_matches(path.name, DOMAINS, n=1, cutoff=0.75)]
    if not close and path.name.startswith("tau2"):
        close = [TAU2_PREFIX + domain for domain in DOMAINS]
    return f" (did you mean: {', '.join(close)}?)" if close else ""


def task_categories(tasks: Iterable[LoadedTask]) -> Counter[str]:
    """Tasks per category, ``""`` counting the tasks that name none."""
    return Counter(loaded.task.category for loaded in tasks)


def select_tasks(
    pack: Pack, patterns: Sequence[str] = (), categories: Sequence[str] = ()
) -> list[LoadedTask]:
    """The tasks of ``pack`` whose id matches one of ``patterns`` (exact ids or shell globs; all when
    none) and whose category is one of ``categories`` (any when none), in pack order.

    A pattern or category that matches no task is refused (exit 2) with the close names, since a
    run that silently drops a mistyped id reports on fewer tasks than the user asked for.
    """
    if not patterns and not categories:
        return list(pack.tasks)  # no selection: every task, none when all of them were skipped
    ids = [loaded.task_id for loaded in pack.tasks]
    for pattern in patterns:
        if not any(fnmatchcase(task_id, pattern) for task_id in ids):
            kind = "matches" if _GLOB_CHARS & set(pattern) else "names"
            raise ConfigError(
                f"--task {pattern!r} {kind} no task of pack {pack.name}{did_you_mean(pattern, ids)}; "
                f"`tolokaforge list {_pack_label(pack)}` lists them"
            )
    known = task_categories(pack.tasks)
    for category in categories:
        if category not in known:
            named = sorted(name for name in known if name)
            choices = f"; its categories: {', '.join(named)}" if named else "; its tasks name no category"
            raise ConfigError(
                f"--category {category!r} names no category of pack {pack.name}"
                f"{did_you_mean(category, named)}{choices}"
            )
    # In the order the patterns are given (pack order within a glob): `--task b --task a` runs b first.
    matched: dict[str, LoadedTask] = {}
    for pattern in patterns or ["*"]:
        for loaded in pack.tasks:
            if fnmatchcase(loaded.task_id, pattern):
                matched.setdefault(loaded.task_id, loaded)
    chosen = [loaded for loaded in matched.values() if not categories or loaded.task.category in categories]
    if not chosen:
        raise ConfigError(
            f"--task {', '.join(patterns)} and --category {', '.join(categories)} together select no task "
            f"of pack {pack.name}"
        )
    return chosen


def _pack_label(pack: Pack) -> str:
    return "PACK" if pack.parts else str(pack.root)
