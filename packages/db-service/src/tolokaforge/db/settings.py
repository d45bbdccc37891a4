"""Service settings: read once at start (CLI flags or ``TOLOKAFORGE_DB_*`` variables) and passed down.

:class:`DbOptions` is the command's option set under the shared convention of
``tolokaforge.core.settings``; :class:`Settings` is what the app is built from. The postgres store has
no default DSN: a default would be the server's maintenance database, and tables would quietly land
there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tolokaforge.core.settings import parse_settings

__all__ = ["ENV_PREFIX", "DbOptions", "Settings"]

ENV_PREFIX = "TOLOKAFORGE_DB_"
PROG = "tolokaforge-db"
StoreKind = Literal["memory", "postgres"]


class DbOptions(BaseModel):
    """Each field is ``--field-name`` and ``TOLOKAFORGE_DB_FIELD_NAME``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    store: StoreKind = Field("memory", description="where tables live")
    dsn: str | None = Field(None, description="PostgreSQL DSN, required with --store postgres")
    host: str = Field("127.0.0.1", description="address to bind")
    port: int = Field(8765, ge=0, le=65535, description="port to bind")
    max_body_bytes: int = Field(64 * 1024 * 1024, gt=0, description="answer 413 above this request size")
    spec: Path | None = Field(None, description="contract file to serve (unset: the packaged one)")
    log_level: Literal["critical", "error", "warning", "info", "debug", "trace"] = Field(
        "warning", description="uvicorn log level"
    )

    @model_validator(mode="after")
    def _postgres_needs_a_dsn(self) -> DbOptions:
        if self.store == "postgres" and not self.dsn:
            raise ValueError(
                f"--store postgres needs --dsn (or {ENV_PREFIX}DSN): there is no default database"
            )
        return self


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the app needs to start; nothing reads the environment after this."""

    store: StoreKind = "memory"
    dsn: str | None = None
    host: str = "127.0.0.1"
    port: int = 8765
    max_body_bytes: int = 64 * 1024 * 1024
    spec_path: Path | None = field(default=None)
    log_level: str = "warning"

    @classmethod
    def from_options(cls, options: DbOptions) -> Settings:
        return cls(
            store=options.store,
            dsn=options.dsn,
            host=options.host,
            port=options.port,
            max_body_bytes=options.max_body_bytes,
            spec_path=options.spec,
            log_level=options.log_level,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Defaults overridden by ``TOLOKAFORGE_DB_*``; a bad value raises ``SettingsError`` (a ValueError)."""
        env = os.environ if environ is None else environ
        return cls.from_options(parse_settings(DbOptions, prog=PROG, prefix=ENV_PREFIX, argv=[], environ=env))
