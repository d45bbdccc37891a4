"""``tolokaforge-runner``: serve the RunnerService until interrupted.

    tolokaforge-runner --port 50051                       (trial state in this process)
    tolokaforge-runner --port 50051 --db-url http://127.0.0.1:8765
    tolokaforge-runner --isolation thread                 (trusted mode: python tools in this process)

Every option is also a ``TOLOKAFORGE_RUNNER_<OPTION>`` variable (``tolokaforge.core.settings``: flags
win). A bad setting, an address that cannot be bound, a public ``--host`` without TLS or a token file
that cannot be used is one line on stderr and exit status 2. The bound address is printed as
``tolokaforge-runner listening on HOST:PORT`` once serving, followed by ``token in PATH``: every call
must carry that token (docs/services.md); without ``--token-file`` a new one is made and written to
the default file for the port, where a host on this machine finds it by itself.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tolokaforge.core.collector import tune_collector
from tolokaforge.core.credentials import (
    CredentialError,
    client_token,
    default_token_path,
    read_token_file,
    refuse_public_bind,
    write_token_file,
)
from tolokaforge.core.settings import exit_on_settings_error, parse_settings

from .guard import EdgeLimits
from .server import RunnerSettings, start_runner

__all__ = ["ENV_PREFIX", "RunnerOptions", "main"]

ENV_PREFIX = "TOLOKAFORGE_RUNNER_"
PROG = "tolokaforge-runner"


class RunnerOptions(BaseModel):
    """The command's options; each field is ``--field-name`` and ``TOLOKAFORGE_RUNNER_FIELD_NAME``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(
        "127.0.0.1", description="address to bind (not loopback: needs --tls-cert and --tls-key)"
    )
    port: int = Field(50051, ge=0, le=65535, description="port to bind (0: any free port)")
    token_file: Path | None = Field(
        None,
        description="file holding the token every call must carry (unset: a new token, written to the "
        "default file for the port)",
    )
    tls_cert: Path | None = Field(None, description="TLS certificate chain (PEM), with --tls-key")
    tls_key: Path | None = Field(None, description="TLS private key (PEM), with --tls-cert")
    store: Literal["memory", "http"] | None = Field(
        None, description="memory: trial state in this process; http: the DB service at --db-url"
    )
    db_url: str | None = Field(None, description="a DB service over HTTP (implies --store http)")
    db_token_file: Path | None = Field(
        None,
        description="the DB service's token file (unset: the file a DB service on this machine wrote "
        "for that port)",
    )
    db_ca: Path | None = Field(
        None, description="the CA (PEM) that signed an https --db-url's certificate (unset: the system's)"
    )
    tool_timeout: float = Field(30.0, gt=0, description="default per-call tool budget in seconds")
    lease: float = Field(
        30.0,
        gt=0,
        le=86400,
        description="seconds this runner's claim on its trials outlives it in the store (renewed every third)",
    )
    max_message_bytes: int = Field(
        default=EdgeLimits.max_message_bytes,
        gt=0,
        description="largest request message accepted (RESOURCE_EXHAUSTED above)",
    )
    idle_timeout: float = Field(
        default=EdgeLimits.idle_timeout_s,
        gt=0,
        description="close a connection with no open call after this many idle seconds",
    )
    receive_timeout: float = Field(
        default=EdgeLimits.receive_timeout_s, gt=0, description="seconds a request message may take to arrive"
    )
    max_streams: int = Field(
        default=EdgeLimits.max_concurrent_streams,
        gt=0,
        description="concurrent calls one connection may have open",
    )
    isolation: Literal["sandbox", "process", "thread"] = Field(
        "sandbox",
        description="sandbox: pack code in supervised processes inside the OS sandbox (bubblewrap, seccomp, "
        "Landlock, a cgroup per trial; docs/isolation.md); process: the same processes without the sandbox; "
        "thread: trusted mode, in this process, only for code you trust",
    )

    golden_replay: Literal["task", "trial"] = Field(
        "task",
        description="task: replay a task's golden path until two trials' replays agree, then reuse "
        "the outcome; trial: replay it for every trial (docs/grading.md)",
    )
    work_dir: Path | None = Field(
        None,
        description="scratch for workspaces, logs and code bundles (default: a new directory in "
        "/dev/shm when it is a tmpfs with 1 GiB free, else in the temporary directory)",
    )

    @model_validator(mode="after")
    def _store_matches_db_url(self) -> RunnerOptions:
        if self.store == "http" and not self.db_url:
            raise ValueError("--store http needs --db-url (or TOLOKAFORGE_RUNNER_DB_URL)")
        if self.store == "memory" and self.db_url:
            raise ValueError("--store memory and --db-url exclude each other")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both --tls-cert and --tls-key")
        return self


def parse_options(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> RunnerOptions:
    return parse_settings(
        RunnerOptions,
        prog=PROG,
        prefix=ENV_PREFIX,
        description="Serve the Tolokaforge RunnerService.",
        argv=argv,
        environ=environ,
    )


async def _serve(settings: RunnerSettings, token_file: Path | None) -> None:
    handle = await start_runner(settings)
    if token_file is None:  # the token was made at start: a client of this machine finds it here
        token_file = default_token_path("runner", handle.port)
        write_token_file(token_file, handle.token)
    tune_collector()  # everything the runner imported to serve lives as long as it
    print(f"{PROG} listening on {handle.address}", flush=True)
    print(f"{PROG} token in {token_file}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await handle.close()


def _db_token(options: RunnerOptions) -> str | None:
    if options.db_url is None:
        return None
    parts = urllib.parse.urlsplit(options.db_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return client_token("db", parts.hostname or "", port, options.db_token_file, flag="--db-token-file")


def _run(argv: Sequence[str] | None) -> int:
    options = parse_options(argv)
    try:
        token = read_token_file(options.token_file, flag="--token-file") if options.token_file else None
        db_token = _db_token(options)
        refuse_public_bind(options.host, tls=options.tls_cert is not None, flags="--tls-cert and --tls-key")
    except CredentialError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    settings = RunnerSettings(
        host=options.host,
        port=options.port,
        token=token,
        tls_cert=options.tls_cert,
        tls_key=options.tls_key,
        db_url=options.db_url,
        db_token=db_token,
        db_ca=options.db_ca,
        default_tool_timeout_s=options.tool_timeout,
        lease_seconds=options.lease,
        edge=EdgeLimits(
            max_message_bytes=options.max_message_bytes,
            idle_timeout_s=options.idle_timeout,
            receive_timeout_s=options.receive_timeout,
            max_concurrent_streams=options.max_streams,
        ),
        isolation=options.isolation,
        golden_replay=options.golden_replay,
        work_dir=options.work_dir,
    )
    try:
        asyncio.run(_serve(settings, options.token_file))
    except CredentialError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"{PROG}: error: cannot serve on {options.host}:{options.port}: {error}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    raise SystemExit(exit_on_settings_error(PROG, lambda: _run(argv)))


if __name__ == "__main__":
    main()
