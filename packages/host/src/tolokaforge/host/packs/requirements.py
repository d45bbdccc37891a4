"""pack.yaml ``requires``: the Python distributions a pack's code imports, checked against this environment.

The host imports the pack's tools and an embedded runner shares its interpreter, so a distribution
missing here is one the pack's code cannot import: the load reports it, named, before any trial runs.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from .problems import ProblemLog

__all__ = ["check_requirements"]


def check_requirements(log: ProblemLog, requires: list[str], file: Path) -> None:
    for index, written in enumerate(requires):
        key = f"requires[{index}]"
        try:
            requirement = Requirement(written)
        except InvalidRequirement as error:
            log.add(
                file, key, f"{written!r} is not a requirement (name, optionally a version range): {error}"
            )
            continue
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            log.add(file, key, f"{requirement.name!r} is not installed in this environment")
            continue
        if requirement.specifier and not requirement.specifier.contains(installed, prereleases=True):
            log.add(
                file,
                key,
                f"{requirement.name} {installed} is installed; the pack needs {requirement.specifier}",
            )
