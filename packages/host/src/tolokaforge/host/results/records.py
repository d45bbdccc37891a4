"""A trial's record, the signature that makes a rewrite of it detectable, and the run's ledger of
the records it accepted, which makes a deletion or a replay of one detectable.

A finished trial's *record* is every file its writer put in the trial directory: ``trajectory.yaml``,
``metrics.yaml``, ``judge_transcript.json`` when a judge ran, each attachment of a call under
``attachments/`` (attachments.py), and ``grade.yaml``. Before ``grade.yaml``
appears, the writer puts ``signature.yaml`` beside them: the sha256 of each file's bytes and an
HMAC-SHA256, under the run's key (run_keys.py), over the run id, the task id, the trial index, the
trial's *attempt* (1 for its first record, 2 for the record written after the first was found
tampered, ...) and those digests. Whoever lacks the key cannot make a signature for other bytes, nor
move a record to another trial or run. A record is exactly its signed files: any other entry in the
trial directory makes it tampered.

A signature alone cannot tell a record that was deleted from one never written, nor the trial's
latest record from an earlier one put back. So the writer also appends one line per record it accepts
to the run's *ledger*, ``ledger.jsonl`` in the output folder, before ``grade.yaml`` appears: the trial,
its attempt, the sha256 of its ``signature.yaml`` and an HMAC over all that and the previous line's
HMAC (a chain: no line can be dropped, changed or reordered unseen). A record counts when it is the
one the ledger accepted last for its trial; a ledger entry whose record is not there intact means a
record was deleted or replaced. ``--resume`` appends a ``revoked`` line for each record it finds
tampered (and moves aside), so the trial runs again as its next attempt and is not reported twice.
Only the tail of a chain can be cut unseen: the writer therefore keeps the ledger's *head* (its number
of entries and its last HMAC) beside the run's key, out of the output folder (run_keys.py), after each
batch; a ledger shorter than its head, or that does not pass through it, was cut short or rolled back.

:func:`check_record` says whether a directory still holds exactly what was signed and accepted, and
hands back the bytes it checked, so a caller parses what was verified and not a file read again later.

The ledger itself -- its lines, its head, reading and appending it -- is ledger.py.

``run.yaml`` carries its own ``signature``: the HMAC over its other keys as canonical JSON (the same
data read back from YAML gives the same JSON), so its run id, options and identity cannot be edited
either.

Standard library and PyYAML only (and attachments.py, which is standard library only): the result-file
helper process imports this.
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
from typing import Any, Literal, Protocol, cast

import yaml

from .attachments import ATTACHMENTS_DIR, is_attachment_path

__all__ = [
    "GRADE_PENDING",
    "JUDGE_TRANSCRIPT",
    "LEDGER_FILE",
    "RECORD_FILES",
    "SIGNATURE_FILE",
    "WRITTEN_FILES",
    "Accepted",
    "RecordCheck",
    "RecordSigner",
    "check_manifest",
    "check_record",
    "read_regular",
]

SIGNATURE_FILE = "signature.yaml"
LEDGER_FILE = "ledger.jsonl"
RECORD_FILES = ("trajectory.yaml", "metrics.yaml", "grade.yaml")
"""The files every finished trial's record holds (a judge's transcript joins them when one ran)."""
JUDGE_TRANSCRIPT = "judge_transcript.json"
"""A judge's transcript: part of the record of a trial a judge graded."""
GRADE_PENDING = "grade.yaml.tmp"
"""grade.yaml as the writer writes it, renamed into place once the ledger accepted the record."""
WRITTEN_FILES = (*RECORD_FILES, JUDGE_TRANSCRIPT, SIGNATURE_FILE, GRADE_PENDING)
"""Every name a writer puts in a trial directory."""
SCHEME = "hmac-sha256"

_TRIAL_DOMAIN = b"tolokaforge trial record 2\n"
_MANIFEST_DOMAIN = b"tolokaforge run manifest 1\n"
_LEDGER_DOMAIN = b"tolokaforge run ledger 1\n"
_MAX_SIGNATURE_BYTES = 64 << 10
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

LedgerEvent = Literal["accepted", "revoked"]


class Accepted(Protocol):
    """What :func:`check_record` needs of the ledger's entry for a trial (ledger.py's LedgerEntry)."""

    @property
    def attempt(self) -> int: ...

    @property
    def signature(self) -> str: ...


def canonical_json(data: Any) -> bytes:
    """One byte string per value: sorted keys, no spaces, UTF-8 (what an HMAC is computed over)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return text.encode("utf-8")


def _trial_message(
    run_id: str, task_id: str, trial_index: int, attempt: int, digests: Mapping[str, str]
) -> bytes:
    body = {
        "run_id": run_id,
        "task_id": task_id,
        "trial_index": trial_index,
        "attempt": attempt,
        "files": dict(digests),
    }
    return _TRIAL_DOMAIN + canonical_json(body)


@dataclass(frozen=True)
class RecordSigner:
    """Signs (and checks) a run's records with its key; the key is never printed (``repr`` leaves it out)."""

    run_id: str
    key: bytes = field(repr=False)

    def _mac(self, message: bytes) -> str:
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def trial_mac(self, task_id: str, trial_index: int, attempt: int, digests: Mapping[str, str]) -> str:
        """The HMAC of attempt ``attempt`` of a trial's record whose files have these sha256
        ``digests`` (name -> hex)."""
        return self._mac(_trial_message(self.run_id, task_id, trial_index, attempt, digests))

    def trial_signature(
        self, task_id: str, trial_index: int, contents: Mapping[str, bytes], attempt: int = 1
    ) -> dict[str, Any]:
        """``signature.yaml``'s document for attempt ``attempt`` of a trial whose files hold
        ``contents`` (name -> bytes); the attempt is the one the run's ledger gives it
        (:meth:`LedgerAppender.next_attempt`)."""
        digests = {name: hashlib.sha256(data).hexdigest() for name, data in sorted(contents.items())}
        return {
            "scheme": SCHEME,
            "run_id": self.run_id,
            "task_id": task_id,
            "trial_index": trial_index,
            "attempt": attempt,
            "files": digests,
            "hmac": self.trial_mac(task_id, trial_index, attempt, digests),
        }

    def manifest_signature(self, data: Mapping[str, Any]) -> str:
        """``run.yaml``'s ``signature`` over ``data`` (every other key of the file)."""
        return f"{SCHEME}:{self._mac(_MANIFEST_DOMAIN + canonical_json(dict(data)))}"

    def ledger_mac(self, previous: str, entry: Mapping[str, Any]) -> str:
        """The HMAC of a ledger line holding ``entry``, chained to the line before (its HMAC,
        ``previous``; empty for the first line)."""
        body = {"run_id": self.run_id, **entry}
        return self._mac(_LEDGER_DOMAIN + previous.encode("ascii") + b"\n" + canonical_json(body))


@dataclass(frozen=True)
class RecordCheck:
    """What :func:`check_record` found: ``problem`` None when the record is intact."""

    problem: str | None
    file: str | None = None
    """The file the problem is about."""
    contents: dict[str, bytes] = field(default_factory=dict[str, bytes], repr=False)
    """Every signed file's bytes, as checked (empty unless the record is intact)."""
    pending: bool = False
    """The record is intact but its grade.yaml is still :data:`GRADE_PENDING`: its writer stopped
    (a crash) after the ledger accepted it and before the rename; ``--resume`` completes it."""

    @property
    def intact(self) -> bool:
        return self.problem is None


def read_regular(path: Path, limit: int | None = None) -> bytes | None:
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


def _listing(directory: Path) -> list[str] | None:
    """The names in ``directory``; None when there is nothing at that path."""
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return None
    except OSError:  # not a directory (a file planted in its place): the caller says so
        return []


def check_record(
    directory: Path, signer: RecordSigner, task_id: str, trial_index: int, accepted: Accepted | None
) -> RecordCheck:
    """Whether ``directory`` holds the record of trial ``task_id``/``trial_index`` of the signer's run,
    byte for byte as it was signed, and nothing else; and, with ``accepted`` (the entry the run's
    ledger accepted last for the trial), whether it is that record. Without ``accepted`` (a run whose
    ledger cannot be trusted: nothing here is vouched for anyway) only the record's own signature is
    checked."""
    deleted = (
        f": a file of the record the ledger accepted (attempt {accepted.attempt}) was deleted"
        if accepted is not None
        else ""
    )
    if os.path.islink(directory):
        return _tampered("the trial's directory is a symlink, not a directory", SIGNATURE_FILE)
    listing = _listing(directory)
    if listing is None:
        return _tampered(f"the trial's directory is missing{deleted}", SIGNATURE_FILE)
    if not os.path.isdir(directory):
        return _tampered("the trial's directory is not a directory", SIGNATURE_FILE)
    try:
        raw = read_regular(directory / SIGNATURE_FILE, _MAX_SIGNATURE_BYTES)
    except ValueError as error:
        return _tampered(f"{SIGNATURE_FILE} is {error}", SIGNATURE_FILE)
    if raw is None:
        if deleted and "grade.yaml" not in listing:  # nothing of the record is left to call it unsigned
            return _tampered(f"{SIGNATURE_FILE} and grade.yaml are missing{deleted}", SIGNATURE_FILE)
        return _tampered(f"{SIGNATURE_FILE} is missing: the record is not signed", SIGNATURE_FILE)
    try:
        loaded: Any = yaml.load(raw, Loader=_SafeLoader)
    except yaml.YAMLError:
        loaded = None
    signature = cast(dict[str, Any], loaded) if isinstance(loaded, dict) else {}
    files_value: Any = signature.get("files")
    files = cast(dict[Any, Any], files_value) if isinstance(files_value, dict) else {}
    mac: Any = signature.get("hmac")
    attempt: Any = signature.get("attempt")
    if (
        signature.get("scheme") != SCHEME
        or not isinstance(mac, str)
        or not isinstance(attempt, int)
        or isinstance(attempt, bool)
        or not files
        or not all(isinstance(name, str) and isinstance(digest, str) for name, digest in files.items())
    ):
        return _tampered(f"{SIGNATURE_FILE} is not a signature this version writes", SIGNATURE_FILE)
    digests = cast(dict[str, str], files)
    if not hmac.compare_digest(signer.trial_mac(task_id, trial_index, attempt, digests), mac):
        return _tampered(
            f"{SIGNATURE_FILE} does not match: it was altered, or signed for another trial or run",
            SIGNATURE_FILE,
        )
    if accepted is not None and (
        attempt != accepted.attempt
        or not hmac.compare_digest(hashlib.sha256(raw).hexdigest(), accepted.signature)
    ):
        return _tampered(
            f"this is attempt {attempt}'s record, and the ledger accepted attempt {accepted.attempt} "
            "last: an earlier record was put back in place of the trial's latest",
            SIGNATURE_FILE,
        )
    for name in RECORD_FILES:
        if name not in digests:
            return _tampered(f"{SIGNATURE_FILE} does not list {name}", name)
    pending = accepted is not None and "grade.yaml" not in listing and GRADE_PENDING in listing
    attached = {name for name in digests if "/" in name}
    expected = {*(digests.keys() - attached), SIGNATURE_FILE} | ({GRADE_PENDING} if pending else set[str]())
    if attached:
        expected.add(ATTACHMENTS_DIR)
        problem = _attachments_problem(directory, attached)
        if problem is not None:
            return problem
    contents: dict[str, bytes] = {}
    for name, digest in sorted(digests.items()):
        if (name in attached and not is_attachment_path(name)) or name in ("", ".", ".."):
            return _tampered(f"{SIGNATURE_FILE} lists {name!r}, which is not a file of the trial", name)
        path = directory / (GRADE_PENDING if pending and name == "grade.yaml" else name)
        try:
            data = read_regular(path)
        except ValueError as error:
            return _tampered(f"{name} is {error}", name)
        if data is None:
            return _tampered(f"{name} is missing{deleted}", name)
        if not hmac.compare_digest(hashlib.sha256(data).hexdigest(), digest):
            return _tampered(f"{name} was changed after it was signed", name)
        contents[name] = data
    added = sorted(set(listing) - expected)
    if added:
        return _tampered(f"{added[0]} is not part of the signed record (a file added to it)", added[0])
    return RecordCheck(None, None, contents, pending)


def _attachments_problem(directory: Path, signed: set[str]) -> RecordCheck | None:
    """None when the trial's attachments folder is a real directory holding exactly the ``signed``
    attachments (their bytes are checked with the record's other files)."""
    folder = directory / ATTACHMENTS_DIR
    if not os.path.lexists(folder):
        return _tampered(f"{ATTACHMENTS_DIR}/, which holds files of the record, is missing", ATTACHMENTS_DIR)
    if os.path.islink(folder) or not os.path.isdir(folder):
        return _tampered(f"{ATTACHMENTS_DIR} is not a directory (a symlink, or a file)", ATTACHMENTS_DIR)
    present = {f"{ATTACHMENTS_DIR}/{entry}" for entry in os.listdir(folder)}
    added = sorted(present - signed)
    if added:
        return _tampered(f"{added[0]} is not part of the signed record (a file added to it)", added[0])
    return None


def check_manifest(manifest: Mapping[str, Any], signer: RecordSigner) -> str | None:
    """None when ``run.yaml`` (as read) carries the signature of its other keys; else what is wrong."""
    signature = manifest.get("signature")
    if not isinstance(signature, str):
        return "it carries no signature"
    rest = {name: value for name, value in manifest.items() if name != "signature"}
    if not hmac.compare_digest(signer.manifest_signature(rest), signature):
        return "its signature does not match: it was changed after the run wrote it"
    return None
