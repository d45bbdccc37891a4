"""A run's runner: the embedded one, called in this process, or one at an address, over gRPC.

Either way the caller holds a :class:`~tolokaforge.core.runner_api.Runner` and never learns which.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Literal

from tolokaforge.core.credentials import CredentialError, client_tls, client_token, refuse_clear_token
from tolokaforge.core.runner_api import Runner

from ..errors import ConfigError
from ..results.redaction import register_secret
from .grpc_runner import GrpcRunner, parse_address

__all__ = ["open_runner"]


@contextlib.asynccontextmanager
async def open_runner(
    address: str | None,
    *,
    transport_budget_s: float = 30.0,
    isolation: Literal["sandbox", "process", "thread"] = "sandbox",
    golden_replay: Literal["task", "trial"] = "task",
    sandbox_without: Sequence[str] = (),
    token_file: Path | None = None,
    ca_file: Path | None = None,
) -> AsyncGenerator[Runner]:
    """The runner at ``address``, or an embedded runner (run with ``isolation`` and ``golden_replay``)
    started for the duration and called directly.

    A runner at ``address`` is called with its token: from ``token_file``, else from the file a runner
    on this machine wrote for that port (docs/services.md); over TLS when ``ca_file`` (the CA that
    signed its certificate) is given. No token is a :class:`ConfigError` naming ``--runner-token-file``.
    """
    if address is not None:
        host, port = parse_address(address)
        try:
            refuse_clear_token(host, tls=ca_file is not None, service="runner", flags="--runner-ca")
            token = client_token("runner", host, port, token_file, flag="--runner-token-file")
            register_secret(token)  # whatever echoes it, it never reaches the results
            tls = None if ca_file is None else client_tls(ca_file)
        except CredentialError as error:
            raise ConfigError(str(error)) from error
        remote = GrpcRunner.connect(
            host, port, token=token, transport_budget_s=transport_budget_s, ssl_context=tls
        )
        try:
            yield remote
        finally:
            await remote.aclose()
        return
    from tolokaforge.runner import RunnerSettings, SandboxUnavailable, start_runner

    settings = RunnerSettings(
        isolation=isolation, golden_replay=golden_replay, sandbox_without=frozenset(sandbox_without)
    )
    try:
        handle = await start_runner(settings, serve=False)
    except SandboxUnavailable as error:  # the machine lacks a layer: a setup error, said in one line
        raise ConfigError(str(error)) from error
    try:
        yield handle.runner
    finally:
        await handle.close()
