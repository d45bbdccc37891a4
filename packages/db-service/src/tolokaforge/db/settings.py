"""Service settings: read once at start (CLI flags or ``TOLOKAFORGE_DB_*`` variables) and passed down."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["ENV_PREFIX", "Settings"]

ENV_PREFIX = "TOLOKAFORGE_DB_"
StoreKind = Literal["memory", "postgres"]


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the app needs to start; nothing reads the environment after this."""

    store: StoreKind = "memory"
    dsn: str = "postgresql://postgres@127.0.0.1:5432/postgres"
    host: str = "127.0.0.1"
    port: int = 8765
    max_body_bytes: int = 64 * 1024 * 1024
    spec_path: Path | None = field(default=None)
    log_level: str = "warning"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Defaults overridden by ``TOLOKAFORGE_DB_STORE``, ``_DSN``, ``_HOST``, ``_PORT``, ``_MAX_BODY_BYTES``,
        ``_SPEC`` and ``_LOG_LEVEL``."""
        env = os.environ if environ is None else environ
        base = cls()

        def get(name: str) -> str | None:
            return env.get(ENV_PREFIX + name) or None

        store = get("STORE") or base.store
        if store not in ("memory", "postgres"):
            raise ValueError(f"{ENV_PREFIX}STORE must be memory or postgres, not {store!r}")
        spec = get("SPEC")
        return cls(
            store=store,
            dsn=get("DSN") or base.dsn,
            host=get("HOST") or base.host,
            port=int(get("PORT") or base.port),
            max_body_bytes=int(get("MAX_BODY_BYTES") or base.max_body_bytes),
            spec_path=Path(spec) if spec else None,
            log_level=get("LOG_LEVEL") or base.log_level,
        )
