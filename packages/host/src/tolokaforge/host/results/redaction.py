"""Secrets the host knows never reach the results folder: each is replaced by ``[redacted]``.

The host knows the API keys it was given (agent, simulated user, judge: ``TOLOKAFORGE_LLM_API_KEY``,
``OPENAI_API_KEY``, ``TOLOKAFORGE_JUDGE_API_KEY``), every environment variable whose name says it holds
a secret (``*API_KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``, ``*_KEY``; not
``*_FILE``, ``*_DIR``, ``*_PATH``, ``*_URL``, which name where a secret is), the password of a model
endpoint URL, and whatever code registers with :func:`register_secret` (a token read from a file, and
the run's signing key in hex, registered when run_keys.py makes or loads it: pack code run as the host's
user, ``--isolation process``, could read its file and echo it in a tool's output).
Values shorter than :data:`MIN_SECRET_CHARS` are left alone: replacing ``true`` or ``4096`` everywhere
would hide nothing and garble everything.

Redaction works on the documents, string by string, before they are rendered, so a key a provider
echoes in an error body (a 401 that quotes the Authorization header) is gone from the transcript, the
error, the retry log, the summary and the report alike, and the YAML around it stays valid.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, cast
from urllib.parse import quote, urlsplit

__all__ = [
    "MIN_SECRET_CHARS",
    "NAMED_SECRETS",
    "REDACTED",
    "Redactor",
    "register_secret",
    "url_password",
]

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8
NAMED_SECRETS = ("TOLOKAFORGE_LLM_API_KEY", "OPENAI_API_KEY", "TOLOKAFORGE_JUDGE_API_KEY")
_SECRET_NAME = re.compile(
    r"API_?KEY|ACCESS_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|_KEY$", re.IGNORECASE
)
_PLACE_NAME = re.compile(r"_(FILE|DIR|PATH|URL|HOST|PORT|ID)$", re.IGNORECASE)

_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """Have every later :meth:`Redactor.from_environment` redact ``value`` (e.g. a token read from a file)."""
    if value and len(value) >= MIN_SECRET_CHARS:
        _registered.add(value)


def url_password(url: str | None) -> str | None:
    """The password in ``scheme://user:password@host/...``, if the URL carries one."""
    if not url:
        return None
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def _secret_names(environ: Mapping[str, str]) -> list[str]:
    return [
        name
        for name in environ
        if name in NAMED_SECRETS or (_SECRET_NAME.search(name) and not _PLACE_NAME.search(name))
    ]


class Redactor:
    """Replaces each known secret (and its URL-encoded form) by :data:`REDACTED`."""

    def __init__(self, secrets: Iterable[str]) -> None:
        found: set[str] = set()
        for secret in secrets:
            if len(secret) >= MIN_SECRET_CHARS:
                found.add(secret)
                found.add(quote(secret, safe=""))
        # Longest first: a secret that contains another is replaced whole.
        self._secrets = sorted(found, key=len, reverse=True)

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str] | None = None, extra: Iterable[str | None] = ()
    ) -> Redactor:
        """Every secret this process knows: see the module's docstring."""
        env = os.environ if environ is None else environ
        values = [env[name] for name in _secret_names(env)]
        return cls([*values, *_registered, *(value for value in extra if value)])

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def value(self, value: Any) -> Any:
        """``value`` with every string in it (dict keys too) redacted; other values as they are."""
        if not self._secrets:
            return value
        return self._walk(value)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            items = cast(dict[Any, Any], value).items()
            return {self._walk(key): self._walk(item) for key, item in items}
        if isinstance(value, list | tuple):
            return [self._walk(item) for item in cast(Iterable[Any], value)]
        return value
