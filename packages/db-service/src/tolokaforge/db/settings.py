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
from tolokaforge.db.service import MAX_TRIAL_BYTES

__all__ = ["ENV_PREFIX", "MAX_BODY_BYTES", "MAX_TRIAL_BYTES", "DbOptions", "Settings"]

ENV_PREFIX = "TOLOKAFORGE_DB_"
PROG = "tolokaforge-db"
StoreKind = Literal["memory", "postgres"]

MAX_BODY_BYTES = 32 * 1024 * 1024
"""The largest request body: twice the largest initial state of a pack we know (a few MB), far below
what would let one request fill the service's memory."""


class DbOptions(BaseModel):
    """Each field is ``--field-name`` and ``TOLOKAFORGE_DB_FIELD_NAME``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    store: StoreKind = Field("memory", description="where tables live")
    dsn: str | None = Field(None, description="PostgreSQL DSN, required with --store postgres")
    host: str = Field(
        "127.0.0.1", description="address to bind (not loopback: needs --tls-cert and --tls-key)"
    )
    port: int = Field(8765, ge=0, le=65535, description="port to bind")
    token_file: Path | None = Field(
        None,
        description="file holding the token every request must present (unset: a new token, written to "
        "the default file for the port, whose path is printed at start)",
    )
    tls_cert: Path | None = Field(None, description="TLS certificate chain (PEM), with --tls-key")
    tls_key: Path | None = Field(None, description="TLS private key (PEM), with --tls-cert")
    max_body_bytes: int = Field(MAX_BODY_BYTES, gt=0, description="answer 413 above this request size")
    max_trial_bytes: int = Field(
        MAX_TRIAL_BYTES,
        gt=0,
        description="answer 413 once the changes a trial was sent since its init add up to more than this",
    )
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
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both --tls-cert and --tls-key")
        return self


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the app needs to start; nothing reads the environment after this."""

    store: StoreKind = "memory"
    dsn: str | None = None
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    """What every request must present; None: a fresh one (the app's ``state.token``)."""
    token_file: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    max_trial_bytes: int = MAX_TRIAL_BYTES
    spec_path: Path | None = field(default=None)
    log_level: str = "warning"

    @classmethod
    def from_options(cls, options: DbOptions) -> Settings:
        return cls(
            store=options.store,
            dsn=options.dsn,
            host=options.host,
            port=options.port,
            token_file=options.token_file,
            tls_cert=options.tls_cert,
            tls_key=options.tls_key,
            max_body_bytes=options.max_body_bytes,
            max_trial_bytes=options.max_trial_bytes,
            spec_path=options.spec,
            log_level=options.log_level,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Defaults overridden by ``TOLOKAFORGE_DB_*``; a bad value raises ``SettingsError`` (a ValueError)."""
        env = os.environ if environ is None else environ
        return cls.from_options(parse_settings(DbOptions, prog=PROG, prefix=ENV_PREFIX, argv=[], environ=env))
