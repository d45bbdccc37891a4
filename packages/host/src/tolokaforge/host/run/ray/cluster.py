"""Connect to the Ray cluster a run names (or start a local one), and size the run's worker pool.

Every other module reaches Ray through this one (``ray`` and the exceptions below), so that
:data:`RAY_ENV` is in the environment before Ray is first imported: Ray reads it once, at import.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
from collections.abc import Generator
from pathlib import Path
from typing import Any, cast

RAY_ENV = {"RAY_LOGGER_LEVEL": "warning", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
"""Set (unless already set) before Ray is imported. Ray's runtime-env agent logs every runtime
environment it creates, env_vars and all, at INFO: at ``warning`` the workers' API key stays out of a
cluster's logs when this process starts it. Ray's ``uv run`` hook would zip the working directory and
start every worker through ``uv run`` in it; workers run the Python they have (docs/ray.md)."""

for _name, _value in RAY_ENV.items():
    os.environ.setdefault(_name, _value)

import ray as _ray_module  # noqa: E402 (after the variables it reads once, at import)
from ray.exceptions import RayActorError, RayTaskError, WorkerCrashedError  # noqa: E402

from tolokaforge.core.credentials import token_dir, write_token_file  # noqa: E402

from ...errors import ConfigError, RunnerUnavailableError  # noqa: E402
from .settings import RaySettings  # noqa: E402

__all__ = [
    "RAY_ENV",
    "RayActorError",
    "RayTaskError",
    "WorkerCrashedError",
    "connected",
    "local_token_file",
    "ray",
    "start_local_cluster",
    "worker_count",
]

ray = cast(Any, _ray_module)
"""Ray's signatures are partly untyped (``**kwargs: Unknown``); we call it through ``Any`` once, here."""


RAY_TOKEN_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
"""Ray's own authentication settings: when the user set any, the cluster is theirs to guard."""


def start_local_cluster(num_cpus: int | None = None, temp_dir: str | None = None) -> None:
    """A single-machine cluster owned by this process (``--ray local``; tests and benchmarks too), under
    a token of its own (:func:`local_token_file`)."""
    _own_cluster_token()
    extra: dict[str, Any] = {"_temp_dir": temp_dir} if temp_dir else {}
    ray.init(
        num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False, **extra
    )


_token_file: Path | None = None


def local_token_file() -> Path | None:
    """The token file of the cluster this process started (None: none started, or the user's own Ray
    authentication settings were kept)."""
    return _token_file


def _own_cluster_token() -> None:
    """Ray guards a cluster ``ray.init`` starts with a token, by default ``~/.ray/auth_token``: one file
    for every cluster of the user, written 0644. This process's cluster gets a token of its own instead,
    in a 0600 file of the user's private token directory, removed at exit; its workers inherit the path
    (never the token) from the environment, and so do the processes this one starts."""
    global _token_file
    if _token_file is not None or any(name in os.environ for name in RAY_TOKEN_ENV):
        return
    path = token_dir() / f"ray-{os.getpid()}.token"
    write_token_file(path, secrets.token_hex(32))
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(path)
    atexit.register(path.unlink, missing_ok=True)
    _token_file = path


@contextlib.contextmanager
def connected(address: str) -> Generator[str]:
    """Connected to ``address`` for the block; yields how (for run.yaml). Never logs credentials: the
    driver's own connection carries no runtime environment (each worker gets its own, see worker.py)."""
    if ray.is_initialized():  # the caller's own connection (a test session, a notebook): theirs to close
        yield "the connection this process already had"
        return
    try:
        if address == "local":
            start_local_cluster()
            how = "a local cluster started for this run"
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
            how = f"the cluster at {address}"
    except ConnectionError as error:
        raise RunnerUnavailableError(f"--ray {address}: no Ray cluster answers there ({error})") from error
    except ValueError as error:
        raise ConfigError(f"--ray {address}: {error}") from error
    try:
        yield how
    finally:
        ray.shutdown()


def worker_count(settings: RaySettings) -> int:
    """One worker per ``worker_cpus`` CPUs of the cluster, at most ``max_workers``."""
    cpus = float(cast(dict[str, float], ray.cluster_resources()).get("CPU", 0.0))
    fits = int(cpus // settings.worker_cpus)
    if fits < 1:
        raise RunnerUnavailableError(
            f"the Ray cluster has {cpus:g} CPUs: not enough for one worker of {settings.worker_cpus:g}"
        )
    return min(fits, settings.max_workers) if settings.max_workers is not None else fits
