"""Connect to the Ray cluster a run names (or start a local one), and size the run's worker pool.

Every other module reaches Ray through this one (``ray`` and the exceptions below), so that
:data:`RAY_ENV` is in the environment before Ray is first imported: Ray reads it once, at import.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator
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

from ..errors import ConfigError, RunnerUnavailableError  # noqa: E402
from .settings import RaySettings  # noqa: E402

__all__ = [
    "RAY_ENV",
    "RayActorError",
    "RayTaskError",
    "WorkerCrashedError",
    "connected",
    "ray",
    "start_local_cluster",
    "worker_count",
]

ray = cast(Any, _ray_module)
"""Ray's signatures are partly untyped (``**kwargs: Unknown``); we call it through ``Any`` once, here."""


def start_local_cluster(num_cpus: int | None = None, temp_dir: str | None = None) -> None:
    """A single-machine cluster owned by this process (``--ray local``; tests and benchmarks too)."""
    extra: dict[str, Any] = {"_temp_dir": temp_dir} if temp_dir else {}
    ray.init(
        num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False, **extra
    )


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
