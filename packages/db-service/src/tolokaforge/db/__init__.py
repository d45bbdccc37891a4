"""Tolokaforge DB Service: per-trial table state (memory and PostgreSQL stores), its ASGI app and clients.

This root is the package's public API; other packages import from here, never from its modules
(``lint-imports`` enforces it). Two audiences:

- **clients** (the runner): :class:`StateClient` and its two implementations, :class:`HttpStateClient`
  (a DB service over HTTP) and :class:`LocalStateClient` (a store in this process, which can also be
  served over HTTP, under a token, with :meth:`LocalStateClient.serve_http`), and the error tree;
- **serving** (the ``tolokaforge-db`` command, benchmarks, tests): the stores behind :class:`Store`,
  :func:`create_app`, :func:`serve_app` / :func:`serve_settings` and :class:`Settings`.
"""

from __future__ import annotations

from .app import create_app
from .client import HealthInfo, LeaseRenewal, StateClient, StateHashes, VersionedState
from .errors import (
    BadRequestError,
    ConflictError,
    DBServiceError,
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    StoreUnreachableError,
    UnauthorizedError,
    ValidationFailedError,
    VersionConflictError,
)
from .http_client import HttpStateClient
from .local_client import LocalStateClient
from .memory import MemoryStore
from .postgres import PostgresStore
from .server import serve_app, serve_settings
from .settings import Settings
from .store import Store, TrialInit

__all__ = [
    "BadRequestError",
    "ConflictError",
    "DBServiceError",
    "ForbiddenError",
    "HealthInfo",
    "HttpStateClient",
    "LeaseRenewal",
    "LocalStateClient",
    "MemoryStore",
    "NotFoundError",
    "PayloadTooLargeError",
    "PostgresStore",
    "Settings",
    "StateClient",
    "StateHashes",
    "Store",
    "StoreUnreachableError",
    "TrialInit",
    "UnauthorizedError",
    "ValidationFailedError",
    "VersionConflictError",
    "VersionedState",
    "create_app",
    "serve_app",
    "serve_settings",
]
