"""A trial's record and the signature that makes a rewrite of it detectable.

A finished trial's *record* is every file its writer put in the trial directory: ``trajectory.yaml``,
``metrics.yaml``, ``judge_transcript.json`` when a judge ran, and ``grade.yaml``. Before ``grade.yaml``
appears, the writer puts ``signature.yaml`` beside them: the sha256 of each file's bytes and an
HMAC-SHA256, under the run's key (run_keys.py), over the run id, the task id, the trial index and those
digests. Whoever lacks the key cannot make a signature for other bytes, nor move a record to another
trial or run. :func:`check_record` says whether a directory still holds exactly what was signed, and
hands back the bytes it checked, so a caller parses what was verified and not a file read again later.

``run.yaml`` carries its own ``signature``: the HMAC over its other keys as canonical JSON (the same
data read back from YAML gives the same JSON), so its run id, options and identity cannot be edited
either.

Standard library and PyYAML only: the result-file helper process imports this.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

__all__ = [
    "RECORD_FILES",
    "SIGNATURE_FILE",
    "RecordCheck",
    "RecordSigner",
    "check_manifest",
    "check_record",
]

SIGNATURE_FILE = "signature.yaml"
RECORD_FILES = ("trajectory.yaml", "metrics.yaml", "grade.yaml")
"""The files every finished trial's record holds (a judge's transcript joins them when one ran)."""
SCHEME = "hmac-sha256"

_TRIAL_DOMAIN = b"tolokaforge trial record 1\n"
_MANIFEST_DOMAIN = b"tolokaforge run manifest 1\n"
_MAX_SIGNATURE_BYTES = 64 << 10
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def canonical_json(data: Any) -> bytes:
    """One byte string per value: sorted keys, no spaces, UTF-8 (what an HMAC is computed over)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return text.encode("utf-8")


def _trial_message(run_id: str, task_id: str, trial_index: int, digests: Mapping[str, str]) -> bytes:
    body = {"run_id": run_id, "task_id": task_id, "trial_index": trial_index, "files": dict(digests)}
    return _TRIAL_DOMAIN + canonical_json(body)


@dataclass(frozen=True)
class RecordSigner:
    """Signs (and checks) a run's records with its key; the key is never printed (``repr`` leaves it out)."""

    run_id: str
    key: bytes = field(repr=False)

    def _mac(self, message: bytes) -> str:
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def trial_mac(self, task_id: str, trial_index: int, digests: Mapping[str, str]) -> str:
        """The HMAC of a trial's record whose files have these sha256 ``digests`` (name -> hex)."""
        return self._mac(_trial_message(self.run_id, task_id, trial_index, digests))

    def trial_signature(
        self, task_id: str, trial_index: int, contents: Mapping[str, bytes]
    ) -> dict[str, Any]:
        """``signature.yaml``'s document for a trial whose files hold ``contents`` (name -> bytes)."""
        digests = {name: hashlib.sha256(data).hexdigest() for name, data in sorted(contents.items())}
        return {
            "scheme": SCHEME,
            "run_id": self.run_id,
            "task_id": task_id,
            "trial_index": trial_index,
            "files": digests,
            "hmac": self.trial_mac(task_id, trial_index, digests),
        }

    def manifest_signature(self, data: Mapping[str, Any]) -> str:
        """``run.yaml``'s ``signature`` over ``data`` (every other key of the file)."""
        return f"{SCHEME}:{self._mac(_MANIFEST_DOMAIN + canonical_json(dict(data)))}"


@dataclass(frozen=True)
class RecordCheck:
    """What :func:`check_record` found: ``problem`` None when the record is intact."""

    problem: str | None
    file: str | None = None
    """The file the problem is about."""
    contents: dict[str, bytes] = field(default_factory=dict[str, bytes], repr=False)
    """Every signed file's bytes, as checked (empty unless the record is intact)."""

    @property
    def intact(self) -> bool:
        return self.problem is None


def _read_regular(path: Path, limit: int | None = None) -> bytes | None:
    """The bytes of a regular file at ``path`` (not through a symlink; a FIFO or device never blocks
    this); None when there is no such file. Raises ValueError past ``limit`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:  # a symlink (ELOOP), a directory, ...: not a file of the record
        raise ValueError(f"not a regular file ({error.strerror})") from error
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if limit is not None and info.st_size > limit:
            raise ValueError(f"larger than {limit} bytes")
        return handle.read()


def _tampered(problem: str, file: str) -> RecordCheck:
    return RecordCheck(problem, file)


def check_record(directory: Path, signer: RecordSigner, task_id: str, trial_index: int) -> RecordCheck:
    """Whether ``directory`` holds the record of trial ``task_id``/``trial_index`` of the signer's run,
    byte for byte as it was signed. Files the signature does not list are not part of the record."""
    try:
        raw = _read_regular(directory / SIGNATURE_FILE, _MAX_SIGNATURE_BYTES)
    except ValueError as error:
        return _tampered(f"{SIGNATURE_FILE} is {error}", SIGNATURE_FILE)
    if raw is None:
        return _tampered(f"{SIGNATURE_FILE} is missing: the record is not signed", SIGNATURE_FILE)
    try:
        loaded: Any = yaml.load(raw, Loader=_SafeLoader)
    except yaml.YAMLError:
        loaded = None
    signature = cast(dict[str, Any], loaded) if isinstance(loaded, dict) else {}
    files_value: Any = signature.get("files")
    files = cast(dict[Any, Any], files_value) if isinstance(files_value, dict) else {}
    mac: Any = signature.get("hmac")
    if (
        signature.get("scheme") != SCHEME
        or not isinstance(mac, str)
        or not files
        or not all(isinstance(name, str) and isinstance(digest, str) for name, digest in files.items())
    ):
        return _tampered(f"{SIGNATURE_FILE} is not a signature this version writes", SIGNATURE_FILE)
    digests = cast(dict[str, str], files)
    if not hmac.compare_digest(signer.trial_mac(task_id, trial_index, digests), mac):
        return _tampered(
            f"{SIGNATURE_FILE} does not match: it was altered, or signed for another trial or run",
            SIGNATURE_FILE,
        )
    for name in RECORD_FILES:
        if name not in digests:
            return _tampered(f"{SIGNATURE_FILE} does not list {name}", name)
    contents: dict[str, bytes] = {}
    for name, digest in sorted(digests.items()):
        if "/" in name or name in ("", ".", ".."):
            return _tampered(f"{SIGNATURE_FILE} lists {name!r}, which is not a file of the trial", name)
        try:
            data = _read_regular(directory / name)
        except ValueError as error:
            return _tampered(f"{name} is {error}", name)
        if data is None:
            return _tampered(f"{name} is missing", name)
        if not hmac.compare_digest(hashlib.sha256(data).hexdigest(), digest):
            return _tampered(f"{name} was changed after it was signed", name)
        contents[name] = data
    return RecordCheck(None, None, contents)


def check_manifest(manifest: Mapping[str, Any], signer: RecordSigner) -> str | None:
    """None when ``run.yaml`` (as read) carries the signature of its other keys; else what is wrong."""
    signature = manifest.get("signature")
    if not isinstance(signature, str):
        return "run.yaml carries no signature"
    rest = {name: value for name, value in manifest.items() if name != "signature"}
    if not hmac.compare_digest(signer.manifest_signature(rest), signature):
        return "run.yaml was changed after the run wrote it (its signature does not match)"
    return None
