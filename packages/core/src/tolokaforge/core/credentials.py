"""Credentials between Tolokaforge's processes: bearer tokens, where they live, who may listen where.

Every hop is authenticated (docs/services.md, "Trust model"). A service holds one secret token; a
client presents it as ``Authorization: Bearer <token>`` (an HTTP header, or gRPC metadata) and the
service compares it in constant time. Tokens never travel in argv or in logs: a service is given a
token *file* (``--token-file``), or makes a token at start and writes it to its default file,
``<token dir>/<service>-<port>.token`` (mode 0600 in a 0700 directory of the user's state directory),
where a client on the same machine, run by the same user, finds it without a flag.

A service refuses to listen on a non-loopback address without TLS: a bearer token sent in clear over a
network is no credential.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import ssl
import stat
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "TOKEN_DIR_ENV",
    "CredentialError",
    "Service",
    "authorize_channel",
    "bearer",
    "client_tls",
    "client_token",
    "default_token_path",
    "is_loopback",
    "new_token",
    "presented_token",
    "read_token_file",
    "refuse_clear_token",
    "refuse_public_bind",
    "token_dir",
    "token_matches",
    "write_token_file",
]

TOKEN_DIR_ENV = "TOLOKAFORGE_TOKEN_DIR"
"""Overrides where default token files live (tests, containers)."""

Service = Literal["runner", "db"]


class CredentialError(ValueError):
    """A token that cannot be used (missing, unreadable, readable by others) or a listen address
    that would expose one; ``str()`` is one line naming the fix."""


def new_token() -> str:
    """A fresh secret: 32 random bytes, URL-safe (fits a header, a file and a URL path segment)."""
    return secrets.token_urlsafe(32)


def token_matches(presented: str | None, expected: str) -> bool:
    """Whether ``presented`` is ``expected``, compared in constant time."""
    if presented is None:
        return False
    return hmac.compare_digest(presented.encode("utf-8", "replace"), expected.encode("utf-8"))


def bearer(token: str) -> str:
    """The ``Authorization`` value carrying ``token``."""
    return f"Bearer {token}"


def presented_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value; None for any other shape."""
    if authorization is None:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return None
    return token.strip()


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` reaches this machine alone (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def refuse_public_bind(host: str, *, tls: bool, flags: str) -> None:
    """Raise :class:`CredentialError` when ``host`` is not loopback and TLS is off; ``flags`` names the
    options that turn TLS on (e.g. ``--tls-cert and --tls-key``)."""
    if not tls and not is_loopback(host):
        raise CredentialError(
            f"refusing to listen on {host} without TLS: its token would cross the network in clear; "
            f"pass {flags} (or listen on 127.0.0.1)"
        )


def refuse_clear_token(host: str, *, tls: bool, service: Service, flags: str) -> None:
    """Raise :class:`CredentialError` when a client would send a token to ``host`` in clear: anywhere
    but loopback needs TLS (``flags`` names the client's options that turn it on)."""
    if not tls and not is_loopback(host):
        raise CredentialError(
            f"refusing to send the {service}'s token to {host} in clear: pass {flags} "
            f"(the {service} must serve TLS there)"
        )


def token_dir() -> Path:
    """Where default token files live: ``$TOLOKAFORGE_TOKEN_DIR``, else ``$XDG_STATE_HOME`` or
    ``~/.local/state``, under ``tolokaforge/tokens``."""
    override = os.environ.get(TOKEN_DIR_ENV)
    if override:
        return Path(override)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "tolokaforge" / "tokens"


def default_token_path(service: Service, port: int) -> Path:
    """The token file a ``service`` listening on ``port`` writes when it is given none."""
    return token_dir() / f"{service}-{port}.token"


def read_token_file(path: Path, *, flag: str) -> str:
    """The token in ``path``; a missing, empty or group/world-readable file is a :class:`CredentialError`
    naming ``flag``."""
    try:
        with path.open("rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            text = handle.read(4096).decode("utf-8", "replace").strip()
    except OSError as error:
        raise CredentialError(f"{flag} {path}: cannot read the token: {error.strerror}") from error
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CredentialError(
            f"{flag} {path}: the token file is readable by other users (mode {stat.S_IMODE(mode):o}); "
            f"chmod 600 it"
        )
    if not text:
        raise CredentialError(f"{flag} {path}: the token file is empty")
    return text


def write_token_file(path: Path, token: str) -> None:
    """Write ``token`` to ``path`` (0600, its directory 0700), replacing any previous one atomically."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    scratch = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(descriptor, token.encode("utf-8") + b"\n")
    finally:
        os.close(descriptor)
    os.replace(scratch, path)


def client_token(service: Service, host: str, port: int, token_file: Path | None, *, flag: str) -> str:
    """The token a client presents to ``service`` at ``host:port``: from ``token_file`` when given, else
    from the default file a service on this machine wrote (loopback only). ``flag`` names the client's
    option in the error when neither is there."""
    if token_file is not None:
        return read_token_file(token_file, flag=flag)
    if is_loopback(host):
        path = default_token_path(service, port)
        if path.exists():
            return read_token_file(path, flag=flag)
        raise CredentialError(
            f"the {service} at {host}:{port} needs its token: pass {flag} (no {path} was written by a "
            f"{service} on this machine)"
        )
    raise CredentialError(f"the {service} at {host}:{port} needs its token: pass {flag}")


def client_tls(ca_file: Path) -> ssl.SSLContext:
    """A client's TLS context trusting ``ca_file`` (PEM), speaking HTTP/2 (gRPC needs ALPN ``h2``)."""
    try:
        context = ssl.create_default_context(cafile=str(ca_file))
    except (OSError, ssl.SSLError) as error:
        raise CredentialError(f"cannot use the CA file {ca_file}: {error}") from error
    context.set_alpn_protocols(["h2"])
    return context


def authorize_channel(channel: Any, token: str) -> None:
    """Make every call on a grpclib ``channel`` carry ``token`` (as ``authorization`` metadata)."""
    from grpclib.events import SendRequest, listen

    value = bearer(token)

    async def add_token(event: SendRequest) -> None:
        event.metadata["authorization"] = value

    listen(channel, SendRequest, add_token)
