"""``run.yaml``: what ran — versions, pack and its digest, agent, models, every option, times, runner.

Written when a run starts and again when it ends, beside ``summary.yaml``. ``--resume`` reads it back
and refuses to continue a run that differs in anything that changes results (:func:`differences`):
the pack (name, version, content digest), the agent, the models, the tasks, the trials per task, and
every option not listed in ``RESULT_NEUTRAL_OPTIONS``. New options are compared by default, so an
option added later cannot silently mix two runs. No API key is ever written: only the endpoint's host,
and every secret the host knows is redacted (redaction.py). ``categories`` maps each selected task to
its category. ``run_id`` names the run's signing key (run_keys.py); ``signature``, the last key, is the
HMAC of all the others under that key (records.py), so ``--resume`` and ``report`` can tell a
``run.yaml`` edited after the fact. ``tampered`` lists every trial record a resume found tampered
with: altered, deleted, replayed or never accepted by the run's ledger (each revoked in the ledger and
run again).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION

from ..errors import ConfigError
from ..packs.loader import Pack
from .records import RecordSigner
from .redaction import Redactor
from .yaml_files import dump_yaml, read_yaml

__all__ = [
    "MANIFEST_FILE",
    "RESULT_NEUTRAL_OPTIONS",
    "RunIdentity",
    "differences",
    "endpoint_host",
    "pack_digest",
    "read_manifest",
    "refuse_resume_if_different",
    "utc_now",
    "write_manifest",
]

MANIFEST_FILE = "run.yaml"

RESULT_NEUTRAL_OPTIONS = frozenset(
    {"pack", "concurrency", "output", "resume", "runner", "llm_timeout", "llm_max_retries", "fail_under",
     "prices", "max_attempts", "llm_base_url", "ray", "ray_workers"}
)  # fmt: skip
"""Options that change how a run goes (where from/to, speed, patience, prices, gates), never what a
trial is. The pack itself is compared by name, version and content digest, not by its path."""

_SKIPPED_PARTS = frozenset({"__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def tolokaforge_version() -> str:
    try:
        return version("tolokaforge-host")
    except PackageNotFoundError:  # a source tree without installed metadata
        return "unknown"


def pack_digest(root: Path) -> str:
    """sha256 over every file of the pack (relative path and bytes, in path order), caches left out."""
    digest = hashlib.sha256()
    files = sorted(
        path
        for path in root.rglob("*")
        if path.is_file()
        and not (_SKIPPED_PARTS & set(path.relative_to(root).parts))
        and path.suffix != ".pyc"
    )
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return "sha256:" + digest.hexdigest()


def _parts_digest(parts: tuple[Pack, ...]) -> str:
    """A combined pack's digest: over each part's name and digest, in order (multi-pack runs)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(f"{part.name}\0{pack_digest(part.root)}\0".encode())
    return "sha256:" + digest.hexdigest()


def endpoint_host(base_url: str | None) -> str | None:
    """The host (and port) of a model endpoint, never its path, query or credentials."""
    if not base_url:
        return None
    parts = urlsplit(base_url)
    return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else None


@dataclass(frozen=True)
class RunIdentity:
    """Everything about a run that decides what its trials are (compared on ``--resume``)."""

    pack_name: str
    pack_version: str
    pack_digest: str
    agent: str
    models: Mapping[str, str | None] = field(default_factory=dict[str, str | None])
    """By role: ``agent``, ``user`` (and any role added later, e.g. a judge)."""
    tasks: tuple[str, ...] = ()
    trials_per_task: int = 1
    options: Mapping[str, Any] = field(default_factory=dict[str, Any])
    categories: Mapping[str, str] = field(default_factory=dict[str, str])
    """Each selected task's category (``task.yaml``), for the report's per-category figures. Not
    compared on ``--resume``: the pack's digest already covers it."""

    @classmethod
    def of(
        cls,
        pack: Pack,
        agent: str,
        models: Mapping[str, str | None],
        tasks: tuple[str, ...],
        trials: int,
        options: Mapping[str, Any],
        categories: Mapping[str, str] | None = None,
    ) -> RunIdentity:
        digest = _parts_digest(pack.parts) if pack.parts else pack_digest(pack.root)
        return cls(
            pack.name,
            pack.version,
            digest,
            agent,
            dict(models),
            tasks,
            trials,
            dict(options),
            dict(categories or {}),
        )

    def compared(self) -> dict[str, Any]:
        """The identity as compared: result-neutral options left out."""
        return {
            "pack.name": self.pack_name,
            "pack.version": self.pack_version,
            "pack.digest": self.pack_digest,
            "agent": self.agent,
            **{f"models.{role}": model for role, model in sorted(self.models.items())},
            "tasks": list(self.tasks),
            "trials_per_task": self.trials_per_task,
            **{
                f"options.{name}": _plain(value)
                for name, value in sorted(self.options.items())
                if name not in RESULT_NEUTRAL_OPTIONS
            },
        }


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(item) for item in cast(tuple[Any, ...], value)]
    return value


def _compared_from_file(manifest: Mapping[str, Any]) -> dict[str, Any]:
    pack = cast(dict[str, Any], manifest.get("pack") or {})
    models = cast(dict[str, Any], manifest.get("models") or {})
    options = cast(dict[str, Any], manifest.get("options") or {})
    return {
        "pack.name": pack.get("name"),
        "pack.version": pack.get("version"),
        "pack.digest": pack.get("digest"),
        "agent": manifest.get("agent"),
        **{f"models.{role}": model for role, model in sorted(models.items())},
        "tasks": list(manifest.get("tasks") or []),
        "trials_per_task": manifest.get("trials_per_task"),
        **{
            f"options.{name}": value
            for name, value in sorted(options.items())
            if name not in RESULT_NEUTRAL_OPTIONS
        },
    }


def differences(recorded: Mapping[str, Any], current: RunIdentity) -> list[str]:
    """``name: recorded -> current`` for everything that differs (empty: the same run)."""
    before, now = _compared_from_file(recorded), current.compared()
    return [
        f"{name}: {before.get(name)!r} -> {now.get(name)!r}"
        for name in sorted(set(before) | set(now))
        if before.get(name) != now.get(name)
    ]


def read_manifest(output: Path) -> dict[str, Any] | None:
    path = output / MANIFEST_FILE
    return read_yaml(path) if path.is_file() else None


def write_manifest(
    output: Path,
    identity: RunIdentity,
    *,
    runner: Mapping[str, Any],
    llm_endpoint: str | None,
    started_at: str,
    finished_at: str | None = None,
    resumed_at: list[str] | None = None,
    run_id: str | None = None,
    tampered: list[dict[str, Any]] | None = None,
    signer: RecordSigner | None = None,
    redactor: Redactor | None = None,
) -> Path:
    """Write ``run.yaml``; ``options`` holds every option as given (neutral ones too), secrets redacted
    by ``redactor``; ``signer`` adds the ``signature`` of everything else."""
    data: dict[str, Any] = {
        "run_id": run_id,
        "tolokaforge_version": tolokaforge_version(),
        "engine_protocol_version": ENGINE_PROTOCOL_VERSION,
        "pack": {
            "name": identity.pack_name,
            "version": identity.pack_version,
            "digest": identity.pack_digest,
        },
        "agent": identity.agent,
        "models": dict(identity.models),
        "llm_endpoint_host": endpoint_host(llm_endpoint),
        "tasks": list(identity.tasks),
        "trials_per_task": identity.trials_per_task,
        "categories": dict(identity.categories),
        "options": {name: _plain(value) for name, value in identity.options.items()},
        "runner": dict(runner),
        "started_at": started_at,
        "resumed_at": resumed_at or [],
        "finished_at": finished_at,
        "tampered": tampered or [],
    }
    if redactor:
        data = redactor.value(data)
    if signer is not None:
        data["signature"] = signer.manifest_signature(data)
    path = output / MANIFEST_FILE
    temporary = path.with_suffix(".tmp")
    temporary.write_text(dump_yaml(data), encoding="utf-8")
    temporary.replace(path)
    return path


def refuse_resume_if_different(
    recorded: Mapping[str, Any] | None, current: RunIdentity, output: Path
) -> None:
    if recorded is None:
        raise ConfigError(
            f"--resume: {output} has no {MANIFEST_FILE}, so it cannot be checked to be the same run"
        )
    changed = differences(recorded, current)
    if changed:
        raise ConfigError(f"--resume refused: {output} is a different run ({'; '.join(changed)})")
