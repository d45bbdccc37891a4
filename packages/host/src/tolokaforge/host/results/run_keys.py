"""Each run's signing key: 32 random bytes, kept where only the user who ran it can read them.

The key signs the run's trial records, its ledger and ``run.yaml`` (records.py). It never goes into the
output folder: whoever can read or write that folder (a colleague, a CI artefact store, a tool of the
pack) must not be able to sign what they rewrite. It lives in ``<key dir>/<run_id>.key`` (hex, mode
0600), in a directory of mode 0700, beside the head of the run's ledger, ``<run_id>.head`` (how many
entries the writer appended, and the last one's HMAC: a ledger cut short or rolled back is seen):

1. ``$TOLOKAFORGE_RUN_KEY_DIR`` when set (tests; a machine whose home is not private);
2. else ``$XDG_STATE_HOME/tolokaforge/run-keys`` when ``XDG_STATE_HOME`` is an absolute path;
3. else ``~/.local/state/tolokaforge/run-keys``.

A key directory inside the output folder is refused. A key file that others may read, or that another
user owns, is refused too: a key others could have read signs nothing. Pack code the runner sandboxes
(``--isolation sandbox``) runs as another user (65534) and sees none of the home directory. Pack code
run with ``--isolation process`` or ``thread`` runs as this user and could read the key: every key made
or loaded is registered with the redactor (redaction.py), so its hex never reaches the results, but
such a run's signatures only say nobody *else* rewrote them.

``run_id`` is the random id ``run.yaml`` records (:func:`new_run_id`); ``--resume`` and ``report`` find
the key by it (:func:`verify_run`). To resume or verify a run on another machine, copy its key and head
files into that machine's key directory (same names, mode 0600).
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError
from .ledger import Ledger, LedgerError, LedgerState
from .records import LEDGER_FILE, RecordSigner, check_manifest
from .redaction import register_secret

__all__ = [
    "KEY_BYTES",
    "KEY_DIR_ENV",
    "RunKeyError",
    "RunVerification",
    "head_path",
    "key_dir",
    "key_path",
    "load_run_key",
    "new_run_id",
    "new_run_key",
    "prepare_key_dir",
    "run_ledger",
    "store_run_key",
    "verify_run",
]

KEY_DIR_ENV = "TOLOKAFORGE_RUN_KEY_DIR"
KEY_BYTES = 32
_RUN_ID = re.compile(r"[0-9a-f]{32}")


class RunKeyError(ConfigError):
    """A run's key cannot be kept or used: where it should be, and why not."""


def new_run_id() -> str:
    """A fresh run id: 128 random bits as hex (it names the key file, so it is never a path)."""
    return secrets.token_hex(16)


def new_run_key() -> bytes:
    key = secrets.token_bytes(KEY_BYTES)
    _never_written(key)
    return key


def _never_written(key: bytes) -> None:
    """Have the redactor clear the key's hex (as its file holds it, and in capitals) from everything
    written: pack code that runs as this user (``--isolation process``) could read the file and echo it."""
    register_secret(key.hex())
    register_secret(key.hex().upper())


def key_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where run keys live (see the module's docstring for the order)."""
    env = os.environ if environ is None else environ
    explicit = env.get(KEY_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    state = env.get("XDG_STATE_HOME")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local" / "state"
    return base / "tolokaforge" / "run-keys"


def key_path(run_id: str) -> Path:
    if not _RUN_ID.fullmatch(run_id):
        raise RunKeyError(f"run.yaml names the run {run_id!r}, which is not a run id this version writes")
    return key_dir() / f"{run_id}.key"


def head_path(run_id: str) -> Path:
    """Where the head of the run's ledger is kept: beside its key."""
    return key_path(run_id).with_suffix(".head")


def run_ledger(signer: RecordSigner, output: Path) -> Ledger:
    """The ledger of the run ``signer`` signs, written in ``output``, its head beside the key."""
    return Ledger(signer, output / LEDGER_FILE, head_path(signer.run_id))


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def prepare_key_dir(output: Path) -> Path:
    """The key directory, created 0700 (or tightened to it), refused inside ``output``."""
    directory = key_dir()
    if _inside(directory.resolve(), output.resolve()):
        raise RunKeyError(
            f"the run-key directory {directory} is inside the output folder {output}: keys must stay out "
            f"of the results' readers' reach; point {KEY_DIR_ENV} elsewhere"
        )
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.stat()
        if info.st_uid != os.getuid():
            raise RunKeyError(
                f"the run-key directory {directory} belongs to another user (uid {info.st_uid})"
            )
        if stat.S_IMODE(info.st_mode) & 0o077:
            directory.chmod(0o700)
    except OSError as error:
        raise RunKeyError(
            f"cannot keep run keys in {directory} ({error.strerror or error}); set {KEY_DIR_ENV} to a "
            "private directory"
        ) from error
    return directory


def store_run_key(run_id: str, key: bytes, output: Path) -> Path:
    """Write a new run's key (0600, never over an existing file); returns where."""
    prepare_key_dir(output)
    path = key_path(run_id)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as error:
        raise RunKeyError(f"cannot create the run key {path}: {error.strerror or error}") from error
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(key.hex() + "\n")
    return path


def load_run_key(run_id: str) -> bytes | None:
    """The run's key; None when there is no key file. Raises :class:`RunKeyError` for a key that cannot
    be trusted (others may read it, another user owns it) or is not a key."""
    path = key_path(run_id)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise RunKeyError(f"cannot read the run key {path}: {error.strerror or error}") from error
    with os.fdopen(fd, "r", encoding="ascii", errors="replace") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise RunKeyError(f"the run key {path} is not a file of this user's")
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise RunKeyError(
                f"the run key {path} may be read by others (mode {stat.S_IMODE(info.st_mode):o}): "
                "it cannot vouch for anything; restore mode 600 if you know nobody read it"
            )
        text = handle.read(4 * KEY_BYTES).strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise RunKeyError(f"the run key {path} is not a key ({KEY_BYTES} bytes in hex)")
    _never_written(key)
    return key


Unverifiable = Literal["key", "manifest", "ledger"]
"""Why a run cannot be verified: its key (or ledger head) is not on this machine or cannot be used;
``run.yaml`` is missing, unsigned or was edited; its ledger cannot be trusted."""


@dataclass(frozen=True)
class RunVerification:
    """What verifying a results folder can rest on: the run's signer and its ledger, as far as they
    could be had, and what keeps the run from being verified (None: nothing)."""

    signer: RecordSigner | None
    ledger: LedgerState | None
    """The ledger, read and checked (None when it could not be)."""
    problem: str | None = None
    """One line: why the run cannot be verified."""
    unverifiable: Unverifiable | None = None

    @property
    def verified(self) -> bool:
        return self.problem is None


def verify_run(output: Path, manifest: Mapping[str, Any] | None) -> RunVerification:
    """Find the key of the run ``manifest`` (its ``run.yaml``) names, check ``run.yaml``'s signature,
    and read the run's ledger against its head. What can be had is handed back even when the run
    cannot be verified (records can still be checked against a key whose run.yaml was edited)."""
    if manifest is None:
        return RunVerification(None, None, "run.yaml is unsigned or was edited: there is none", "manifest")
    run_id = manifest.get("run_id")
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        return RunVerification(
            None,
            None,
            f"run.yaml is unsigned or was edited: it names no run id this version writes ({run_id!r})",
            "manifest",
        )
    try:
        key = load_run_key(run_id)
    except RunKeyError as error:
        return RunVerification(None, None, f"the run's key cannot be used: {error}", "key")
    if key is None:
        return RunVerification(
            None,
            None,
            f"the run's key is not on this machine (looked in {key_dir()} for {run_id}.key)",
            "key",
        )
    signer = RecordSigner(run_id, key)
    ledger = run_ledger(signer, output)
    problem: str | None = None
    unverifiable: Unverifiable | None = None
    altered = check_manifest(manifest, signer)
    if altered is not None:
        problem, unverifiable = f"run.yaml is unsigned or was edited: {altered}", "manifest"
    assert ledger.head is not None
    if not ledger.head.exists() and not ledger.head.is_symlink():
        ledger = Ledger(signer, ledger.path)  # the records can still be checked against the ledger
        if problem is None:
            problem, unverifiable = (
                f"the run's key is not on this machine (looked in {key_dir()}: {run_id}.key is there, "
                f"its ledger head {run_id}.head is not)",
                "key",
            )
    try:
        state = ledger.read()
    except LedgerError as error:
        return RunVerification(
            signer, None, problem or f"the run's ledger cannot be trusted: {error}", unverifiable or "ledger"
        )
    return RunVerification(signer, state, problem, unverifiable)
