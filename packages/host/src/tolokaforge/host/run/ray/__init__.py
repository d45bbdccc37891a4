"""Scale-out on Ray: a run's trials on the workers of a Ray cluster (``tolokaforge run --ray ADDRESS``).

Only :class:`RaySettings` is imported eagerly; Ray itself is imported when a run asks for it (``ray`` is
the optional extra ``tolokaforge-host[ray]``, and importing it costs seconds a local run should not pay).

settings.py  RaySettings (address, worker cap, the agent recipe) and the credential variables
cluster.py   connect to (or start) the cluster, how many workers it holds, disconnect
worker.py    TrialWorker: the Ray actor, one embedded runner each, whole trials through the conductor
driver.py    RayPool: workers up and health-checked, trials scheduled with back-pressure, outcomes
             streamed back, a dead worker's trial retried on a fresh worker
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import Any

from .settings import CREDENTIAL_VARIABLES, RaySettings

__all__ = ["CREDENTIAL_VARIABLES", "RaySettings", "ray_api", "ray_connection"]


@contextlib.contextmanager
def ray_connection(address: str) -> Generator[str]:
    """Connected to the cluster at ``address`` (``local``, ``auto``, ``HOST:PORT``) for the block, as
    ``--ray`` connects (Ray imported here, with ``RAY_ENV`` set first); yields how, in words."""
    from .cluster import connected

    with connected(address) as how:
        yield how


def ray_api() -> Any:
    """The ``ray`` module, imported with ``RAY_ENV`` set first (Ray reads it once, at import): whoever
    drives Ray imports it through here, or ``uv run`` would make Ray ship the whole checkout to workers."""
    from .cluster import ray

    return ray
