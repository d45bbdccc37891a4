"""Each run's signing key: 32 random bytes, kept where only the user who ran it can read them.

The key signs the run's trial records and ``run.yaml`` (records.py). It never goes into the output
folder: whoever can read or write that folder (a colleague, a CI artefact store, a tool of the pack)
must not be able to sign what they rewrite. It lives in ``<key dir>/<run_id>.key`` (hex, mode 0600), in
a directory of mode 0700:

1. ``$TOLOKAFORGE_RUN_KEY_DIR`` when set (tests; a machine whose home is not private);
2. else ``$XDG_STATE_HOME/tolokaforge/run-keys`` when ``XDG_STATE_HOME`` is an absolute path;
3. else ``~/.local/state/tolokaforge/run-keys``.

A key directory inside the output folder is refused. A key file that others may read, or that another
user owns, is refused too: a key others could have read signs nothing. Pack code the runner sandboxes
runs as another user (65534) and sees none of the home directory anyway.

``run_id`` is the random id ``run.yaml`` records (:func:`new_run_id`); ``--resume`` and ``report`` find
the key by it. To resume or verify a run on another machine, copy its key file into that machine's key
directory (same name, mode 0600).
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from .errors import ConfigError

__all__ = [
    "KEY_BYTES",
    "KEY_DIR_ENV",
    "RunKeyError",
    "key_dir",
    "key_path",
    "load_run_key",
    "new_run_id",
    "new_run_key",
    "prepare_key_dir",
    "store_run_key",
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
    return secrets.token_bytes(KEY_BYTES)


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
    return key
