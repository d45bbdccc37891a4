"""Read one Terminal-Bench task folder: its settings, instruction, verifier and reference solution.

Two layouts (docs/terminal.md): the current one -- ``task.toml``, ``<task>/instruction.md``,
``environment/``, ``<task>/tests/test.sh``, ``solution/solve.sh`` -- and the older one the public
Tolokaforge project also reads -- ``task.yaml`` (its ``instruction``), ``run-tests.sh`` beside
``tests/``, a ``docker-compose.yaml`` and ``solution.sh``. Every key is either understood or
reported with its dotted path; nothing is dropped unread.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..problems import ProblemLog

__all__ = ["TerminalTaskDir", "is_terminal_task_dir", "read_task_dir"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DEFAULT_VERIFIER_TIMEOUT_S = 120.0
"""The verifier's budget when the task names none (the public adapter's default too)."""

# task.toml: table -> keys understood in it (None: free-form, as Terminal-Bench's metadata is).
_TOML_KEYS: dict[str, frozenset[str] | None] = {
    "metadata": None,
    "task": frozenset({"name", "description", "authors", "keywords"}),
    "verifier": frozenset({"timeout_sec", "env"}),
    "agent": frozenset({"timeout_sec"}),
    "environment": frozenset({"build_timeout_sec", "cpus", "memory_mb", "storage_mb", "docker_image"}),
    "solution": frozenset({"env"}),
}
_TOML_TOP = frozenset({"version", "schema_version"})
_REFUSED_TOML = {
    "verifier.user": "the verifier runs as the sandbox's unprivileged user; another user cannot be chosen",
}

_YAML_KEYS = frozenset(
    {
        "instruction",
        "descriptions",
        "author_name",
        "author_email",
        "difficulty",
        "category",
        "tags",
        "max_agent_timeout_sec",
        "max_test_timeout_sec",
        "parser_name",
        "run_tests_in_same_shell",
        "disable_asciinema",
        "estimated_duration_sec",
        "expert_time_estimate_min",
        "junior_time_estimate_min",
    }
)


@dataclass
class TerminalTaskDir:
    folder: Path
    task_id: str
    instruction: str
    tests: dict[str, str]
    """The verifier's files, as they are laid out under /tests."""
    script: str
    """The verifier script's name among ``tests``."""
    solution: str | None
    verifier_timeout_s: float = DEFAULT_VERIFIER_TIMEOUT_S
    verifier_env: dict[str, str] = field(default_factory=dict[str, str])
    solution_env: dict[str, str] = field(default_factory=dict[str, str])
    category: str = "terminal"
    docker_image: str | None = None
    """task.toml ``environment.docker_image``: a prebuilt image (which this machine cannot run)."""
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])


def is_terminal_task_dir(folder: Path) -> bool:
    """A task folder of either Terminal-Bench layout (not one of our task.yaml task folders)."""
    if not folder.is_dir():
        return False
    if (folder / "task.toml").is_file() and (folder / "tests").is_dir():
        return True
    return (folder / "task.yaml").is_file() and (folder / "run-tests.sh").is_file()


def read_task_dir(log: ProblemLog, folder: Path) -> TerminalTaskDir | None:
    """The task at ``folder``, or None after logging every problem found."""
    mark = log.mark()
    toml = _read_toml(log, folder / "task.toml")
    legacy = _read_legacy_yaml(log, folder / "task.yaml")
    instruction = _instruction(log, folder, legacy)
    tests, script = _tests(log, folder)
    solution = _solution(log, folder)
    verifier: dict[str, Any] = cast(dict[str, Any], toml.get("verifier", {}))
    timeout: Any = verifier.get("timeout_sec", legacy.get("max_test_timeout_sec", DEFAULT_VERIFIER_TIMEOUT_S))
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        log.add(
            folder / "task.toml",
            "verifier.timeout_sec",
            f"must be a positive number of seconds, not {timeout!r}",
        )
        timeout = DEFAULT_VERIFIER_TIMEOUT_S
    env = _env(log, folder / "task.toml", "verifier", verifier.get("env", {}))
    solution_env = _env(log, folder / "task.toml", "solution", toml.get("solution", {}).get("env", {}))
    environment: dict[str, Any] = cast(dict[str, Any], toml.get("environment", {}))
    image: Any = environment.get("docker_image")
    metadata: dict[str, Any] = cast(dict[str, Any], toml.get("metadata", {}))
    category: Any = metadata.get("category", legacy.get("category", "terminal"))
    if log.since(mark) or instruction is None or tests is None:
        return None
    return TerminalTaskDir(
        folder=folder,
        task_id=folder.name,
        instruction=instruction,
        tests=tests,
        script=script,
        solution=solution,
        verifier_timeout_s=float(timeout),
        verifier_env=env,
        solution_env=solution_env,
        category=str(category),
        docker_image=str(image) if image else None,
        metadata={**{k: v for k, v in legacy.items() if k != "instruction"}, **metadata},
    )


def _env(log: ProblemLog, file: Path, table: str, raw: Any) -> dict[str, str]:
    env: dict[str, str] = {}
    if not isinstance(raw, dict):
        log.add(file, f"{table}.env", "must be a table of strings")
        return env
    for key, value in cast(dict[Any, Any], raw).items():
        if not _ENV_NAME.fullmatch(str(key)):
            log.add(file, f"{table}.env.{key}", "is not an environment variable name (letters, digits, _)")
        elif isinstance(value, str | int | float) and not isinstance(value, bool):
            env[str(key)] = str(value)
        else:
            log.add(file, f"{table}.env.{key}", "must be a string or a number")
    return env


def _read_toml(log: ProblemLog, file: Path) -> dict[str, Any]:
    if not file.is_file():
        return {}
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        log.add(file, "", f"is not valid TOML: {error}")
        return {}
    for key, value in raw.items():
        if key in _TOML_TOP:
            continue
        if key not in _TOML_KEYS:
            log.add(file, key, "is not a task.toml key read here (see docs/terminal.md)")
            continue
        if not isinstance(value, dict):
            log.add(file, key, "must be a table")
            continue
        allowed = _TOML_KEYS[key]
        for inner in cast(dict[str, Any], value):
            path = f"{key}.{inner}"
            if path in _REFUSED_TOML:
                log.add(file, path, f"is not supported: {_REFUSED_TOML[path]}")
            elif allowed is not None and inner not in allowed:
                log.add(file, path, "is not a task.toml key read here (see docs/terminal.md)")
    return raw


def _read_legacy_yaml(log: ProblemLog, file: Path) -> dict[str, Any]:
    if not file.is_file():
        return {}
    raw = log.read_yaml(file)
    if raw is None:
        return {}
    for key in raw:
        if key not in _YAML_KEYS:
            log.add(file, str(key), "is not a Terminal-Bench task.yaml key read here (see docs/terminal.md)")
    if raw.get("parser_name", "pytest") != "pytest":
        log.add(
            file, "parser_name", "only 'pytest' is read here (the verifier's exit status and reward decide)"
        )
    if raw.get("run_tests_in_same_shell") is True:
        log.add(
            file,
            "run_tests_in_same_shell",
            "true is not supported: the verifier runs in a fresh shell over the agent's workspace",
        )
    return raw


def _instruction(log: ProblemLog, folder: Path, legacy: dict[str, Any]) -> str | None:
    """task.yaml ``instruction`` first, then <task>/instruction.md (the public adapter's order)."""
    text: Any = legacy.get("instruction")
    if text is not None and not isinstance(text, str):
        log.add(folder / "task.yaml", "instruction", "must be text")
        return None
    if not text and (folder / "instruction.md").is_file():
        text = (folder / "instruction.md").read_text(encoding="utf-8")
    if not text or not str(text).strip():
        log.add(
            folder / "instruction.md", "", "is required: what the agent is told (or task.yaml instruction)"
        )
        return None
    return str(text)


def _tests(log: ProblemLog, folder: Path) -> tuple[dict[str, str] | None, str]:
    """The verifier's files under /tests: tests/ itself, plus the older layout's run-tests.sh."""
    tests_dir = folder / "tests"
    files: dict[str, str] = {}
    if tests_dir.is_dir():
        for path in sorted(p for p in tests_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            try:
                files[path.relative_to(tests_dir).as_posix()] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                log.add(path, "", "is not UTF-8 text: the verifier's files travel to the runner as text")
    legacy = folder / "run-tests.sh"
    if legacy.is_file():
        if "run-tests.sh" in files:
            log.add(legacy, "", "tests/run-tests.sh exists too: which one is the verifier is ambiguous")
        files["run-tests.sh"] = legacy.read_text(encoding="utf-8")
        return files, "run-tests.sh"
    if "test.sh" not in files:
        log.add(tests_dir / "test.sh", "", "is required: the task's verifier")
        return None, "test.sh"
    return files, "test.sh"


def _solution(log: ProblemLog, folder: Path) -> str | None:
    for candidate in (folder / "solution" / "solve.sh", folder / "solution.sh"):
        if candidate.is_file():
            try:
                return candidate.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                log.add(candidate, "", "is not UTF-8 text")
                return None
    return None
