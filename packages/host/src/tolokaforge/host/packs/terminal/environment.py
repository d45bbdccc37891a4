"""What a Terminal-Bench task's container would hold, and whether this machine's sandbox can stand in for it.

There is no container engine for trials here: a trial runs in the runner's sandbox, which sees this
machine's system read-only and one writable workspace. A Dockerfile is therefore read, not built. It
runs here when all it does is pick a base image whose userland the system provides, set the working
directory and environment, and copy files of its build context into the working directory; those files
become the trial's starting workspace. Anything else (a ``RUN`` step, a base image we cannot provide, a
file placed outside the working directory, a second compose service) makes the task *skipped*, with the
instruction that caused it as the reason (docs/terminal.md).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, cast

import yaml

__all__ = ["BASE_IMAGES", "Environment", "EnvironmentSkipped", "read_environment"]

BASE_IMAGES = ("debian", "ubuntu", "python")
"""Base images (any tag) whose userland this machine's Debian system and Python stand in for."""

_IGNORED = ("CMD", "ENTRYPOINT", "LABEL", "EXPOSE", "SHELL", "STOPSIGNAL", "HEALTHCHECK", "MAINTAINER")
"""Instructions that say how a container starts or is labelled, not what it holds: the trial's shell
and verifier are started by the runner."""


class EnvironmentSkipped(Exception):
    """The task's environment needs a container this machine cannot provide; the message says why."""


@dataclass(frozen=True)
class Environment:
    workdir: str
    """The Dockerfile's WORKDIR (``/app`` when it sets none, as Terminal-Bench images do)."""
    files: dict[str, Path] = field(default_factory=dict[str, Path])
    """Workspace path -> the build-context file it is copied from."""
    env: dict[str, str] = field(default_factory=dict[str, str])


def read_environment(task_dir: Path) -> Environment:
    """The environment of the task at ``task_dir``; EnvironmentSkipped when the sandbox cannot be it."""
    dockerfile = _dockerfile(task_dir)
    context = dockerfile.parent
    _check_compose(task_dir)
    workdir = "/app"
    files: dict[str, Path] = {}
    env: dict[str, str] = {}
    seen_from = False
    for line_no, instruction, argument in _instructions(dockerfile):
        where = f"{dockerfile.relative_to(task_dir).as_posix()} line {line_no}"
        if instruction == "FROM":
            if seen_from:
                raise EnvironmentSkipped(f"{where}: a multi-stage build needs a container build")
            seen_from = True
            _check_base(argument, where)
        elif instruction == "WORKDIR":
            workdir = str(PurePosixPath(workdir) / argument)
            if _is_system(workdir):
                raise EnvironmentSkipped(f"{where}: WORKDIR {workdir} is inside the read-only system")
        elif instruction == "ENV":
            env.update(_env_pairs(argument, where))
        elif instruction in ("COPY", "ADD"):
            files.update(_copied(instruction, argument, context, workdir, where))
        elif instruction in _IGNORED:
            continue
        elif instruction == "ARG":
            raise EnvironmentSkipped(f"{where}: build arguments (ARG) need a container build")
        else:
            raise EnvironmentSkipped(
                f"{where}: {instruction} needs a container build (no container engine runs trials here)"
            )
    if not seen_from:
        raise EnvironmentSkipped(f"{dockerfile.name}: no FROM instruction")
    return Environment(workdir=workdir, files=files, env=env)


def _dockerfile(task_dir: Path) -> Path:
    for candidate in (task_dir / "environment" / "Dockerfile", task_dir / "Dockerfile"):
        if candidate.is_file():
            return candidate
    raise EnvironmentSkipped("no environment/Dockerfile (or Dockerfile) describes the task's container")


def _check_compose(task_dir: Path) -> None:
    """A compose file may describe the one container; a second service (a database, a web app) cannot run here."""
    for compose in (
        task_dir / "docker-compose.yaml",
        task_dir / "docker-compose.yml",
        task_dir / "environment" / "docker-compose.yaml",
        task_dir / "environment" / "docker-compose.yml",
    ):
        if not compose.is_file():
            continue
        try:
            raw: Any = yaml.safe_load(compose.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as error:
            raise EnvironmentSkipped(f"{compose.name} cannot be read: {error}") from error
        services: Any = cast(dict[str, Any], raw).get("services") if isinstance(raw, dict) else None
        names = sorted(cast(dict[str, Any], services)) if isinstance(services, dict) else []
        if len(names) > 1:
            raise EnvironmentSkipped(
                f"{compose.relative_to(task_dir).as_posix()}: services {', '.join(names)} need a container "
                "engine (only the one task container is stood in for by the sandbox)"
            )


def _instructions(dockerfile: Path) -> list[tuple[int, str, str]]:
    """(line number, INSTRUCTION, argument) with continuation lines joined and comments dropped."""
    found: list[tuple[int, str, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(dockerfile.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        head, _, argument = whole.partition(" ")
        found.append((start, head.upper(), argument.strip()))
    if pending:
        head, _, argument = pending.strip().partition(" ")
        found.append((start, head.upper(), argument.strip()))
    return found


def _check_base(argument: str, where: str) -> None:
    words = argument.split()
    if any(word.startswith("--") for word in words):
        raise EnvironmentSkipped(f"{where}: FROM {argument}: options need a container build")
    image = words[0] if words else ""
    name = image.split("@")[0].rsplit(":", 1)[0] if ":" in image.split("/")[-1] else image.split("@")[0]
    if name.removeprefix("docker.io/").removeprefix("library/") not in BASE_IMAGES:
        raise EnvironmentSkipped(
            f"{where}: base image {image!r} is not provided here (the sandbox stands in for "
            f"{', '.join(BASE_IMAGES)} images only)"
        )


def _env_pairs(argument: str, where: str) -> dict[str, str]:
    words = shlex.split(argument)
    if words and all("=" in word for word in words):
        return dict(word.split("=", 1) for word in words)
    if len(words) >= 2 and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}  # the legacy form: ENV KEY value
    raise EnvironmentSkipped(f"{where}: ENV {argument!r} is not KEY=value")


def _copied(instruction: str, argument: str, context: Path, workdir: str, where: str) -> dict[str, Path]:
    """Workspace path -> context file for one COPY/ADD that puts build-context files in the workdir."""
    try:
        words = shlex.split(argument)
    except ValueError as error:
        raise EnvironmentSkipped(f"{where}: {instruction} {argument!r}: {error}") from error
    if argument.lstrip().startswith("["):
        raise EnvironmentSkipped(f"{where}: the JSON form of {instruction} is not read here")
    options = [word for word in words if word.startswith("--")]
    if options:
        raise EnvironmentSkipped(f"{where}: {instruction} {' '.join(options)} needs a container build")
    if len(words) < 2:
        raise EnvironmentSkipped(f"{where}: {instruction} needs a source and a destination")
    *sources, destination = words
    target = PurePosixPath(workdir) / destination
    inside = _relative_to(target, PurePosixPath(workdir))
    if inside is None:
        raise EnvironmentSkipped(
            f"{where}: {instruction} to {target} places files outside the working directory {workdir}"
        )
    root = context.resolve()
    copied: dict[str, Path] = {}
    for source in sources:
        if "://" in source or any(ch in source for ch in "*?["):
            raise EnvironmentSkipped(
                f"{where}: {instruction} {source}: only plain build-context paths are read"
            )
        found = (root / source).resolve()
        if not found.is_relative_to(root) or not found.exists():
            raise EnvironmentSkipped(f"{where}: {instruction} {source}: not a file of the build context")
        directory_target = destination.endswith("/") or len(sources) > 1 or found.is_dir()
        if found.is_dir():
            for path in sorted(p for p in found.rglob("*") if p.is_file()):
                copied[_join(inside, path.relative_to(found).as_posix())] = path
        else:
            copied[_join(inside, found.name) if directory_target else inside or found.name] = found
    return copied


def _relative_to(path: PurePosixPath, root: PurePosixPath) -> str | None:
    normal = PurePosixPath(*_normal_parts(path))
    try:
        return normal.relative_to(root).as_posix().removeprefix(".")
    except ValueError:
        return None


def _normal_parts(path: PurePosixPath) -> list[str]:
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            if len(parts) > 1:
                parts.pop()
        elif part != ".":
            parts.append(part)
    return parts


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _is_system(path: str) -> bool:
    return any(
        path == root or path.startswith(root + "/")
        for root in ("/usr", "/bin", "/sbin", "/lib", "/etc", "/proc", "/dev")
    )
