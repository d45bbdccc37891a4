"""Connect to the Ray cluster a run names (or start a local one), and size the run's worker pool."""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import Any, cast

import ray as _ray_module

from ..errors import ConfigError, RunnerUnavailableError
from .settings import RaySettings

__all__ = ["connected", "ray", "worker_count"]

ray = cast(Any, _ray_module)
"""Ray's signatures are partly untyped (``**kwargs: Unknown``); we call it through ``Any`` once, here."""


@contextlib.contextmanager
def connected(address: str) -> Generator[str]:
    """Connected to ``address`` for the block; yields how (for run.yaml). Never logs credentials: the
    driver's own connection carries no runtime environment (each worker gets its own, see worker.py)."""
    if ray.is_initialized():  # the caller's own connection (a test session, a notebook): theirs to close
        yield "the connection this process already had"
        return
    try:
        if address == "local":
            ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
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
