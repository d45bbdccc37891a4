"""A trial's record, the signature that makes a rewrite of it detectable, and the run's ledger of
the records it accepted, which makes a deletion or a replay of one detectable.

A finished trial's *record* is every file its writer put in the trial directory: ``trajectory.yaml``,
``metrics.yaml``, ``judge_transcript.json`` when a judge ran, and ``grade.yaml``. Before ``grade.yaml``
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
from typing import Any, Literal, cast

import yaml

__all__ = [
    "GRADE_PENDING",
    "JUDGE_TRANSCRIPT",
    "LEDGER_FILE",
    "RECORD_FILES",
    "SIGNATURE_FILE",
    "WRITTEN_FILES",
    "Ledger",
    "LedgerAppender",
    "LedgerEntry",
    "LedgerError",
    "LedgerHead",
    "LedgerState",
    "RecordCheck",
    "RecordSigner",
    "check_manifest",
    "check_record",
    "read_head",
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
_HEAD_BYTES = 86
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

LedgerEvent = Literal["accepted", "revoked"]


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
class LedgerEntry:
    """One line of the ledger: the record of ``attempt`` of a trial, accepted or revoked."""

    task_id: str
    trial_index: int
    attempt: int
    event: LedgerEvent
    signature: str
    """sha256 of the record's signature.yaml (hex)."""
    mac: str
    line: int
    """Its line in ledger.jsonl (from 1)."""

    def fields(self) -> dict[str, Any]:
        """What the line's HMAC covers (with the run id and the previous HMAC)."""
        return {
            "task_id": self.task_id,
            "trial_index": self.trial_index,
            "attempt": self.attempt,
            "event": self.event,
            "signature": self.signature,
        }

    def text(self) -> bytes:
        """The line as written: one JSON object (JSON Lines)."""
        line = json.dumps({**self.fields(), "mac": self.mac}, separators=(", ", ": "), ensure_ascii=True)
        return line.encode("ascii") + b"\n"


@dataclass(frozen=True)
class LedgerHead:
    """How far the ledger had reached when the writer last said so: entries, and the last one's HMAC."""

    entries: int
    mac: str

    def text(self) -> bytes:
        """Always :data:`_HEAD_BYTES` long, so a new head is written over the old one in place."""
        return f"{self.entries:020d} {self.mac or '0' * 64}\n".encode("ascii")


class LedgerError(Exception):
    """The ledger cannot be trusted (its chain breaks, it was cut short): ``str()`` says where."""


@dataclass
class LedgerState:
    """A ledger read and verified: its entries' count, its last HMAC, and per trial what it holds."""

    entries: int = 0
    mac: str = ""
    latest: dict[tuple[str, int], LedgerEntry] = field(default_factory=dict[tuple[str, int], LedgerEntry])
    """Per trial, its last entry (an accepted record, or the revocation of one)."""
    attempts: dict[tuple[str, int], int] = field(default_factory=dict[tuple[str, int], int])
    """Per trial, the highest attempt the ledger names."""
    valid_bytes: int = 0
    """Where the last whole line ends (a line cut short by a crash after it is not part of the ledger)."""

    @property
    def head(self) -> LedgerHead:
        return LedgerHead(self.entries, self.mac)

    def accepted(self, task_id: str, trial_index: int) -> LedgerEntry | None:
        """The record the ledger accepted last for the trial; None when it never accepted one or
        revoked the last it did."""
        entry = self.latest.get((task_id, trial_index))
        return entry if entry is not None and entry.event == "accepted" else None

    def next_attempt(self, task_id: str, trial_index: int) -> int:
        return self.attempts.get((task_id, trial_index), 0) + 1

    def not_accepted(self, task_id: str, trial_index: int) -> str:
        """Why a finished record of a trial the ledger holds no accepted record of is not the trial's."""
        revoked = self.latest.get((task_id, trial_index))
        if revoked is not None:
            return (
                f"the run's ledger revoked this trial's attempt {revoked.attempt} and accepted no record "
                "since: this one was put back"
            )
        return "the run's ledger accepted no record of this trial: this one was put here"

    def add(self, entry: LedgerEntry) -> None:
        key = (entry.task_id, entry.trial_index)
        self.latest[key] = entry
        self.attempts[key] = max(self.attempts.get(key, 0), entry.attempt)
        self.entries += 1
        self.mac = entry.mac


def _entry(signer: RecordSigner, previous: str, raw: bytes, number: int) -> LedgerEntry:
    """Line ``number`` of the ledger, checked against the line before; LedgerError if it is not."""
    where = f"{LEDGER_FILE} line {number}"
    try:
        loaded: Any = json.loads(raw) if raw.startswith(b"{") else None
    except ValueError:
        loaded = None
    data = cast(dict[str, Any], loaded) if isinstance(loaded, dict) else {}
    task_id, index, attempt = data.get("task_id"), data.get("trial_index"), data.get("attempt")
    event, signature, mac = data.get("event"), data.get("signature"), data.get("mac")
    if (
        set(data) != {"task_id", "trial_index", "attempt", "event", "signature", "mac"}
        or not isinstance(task_id, str)
        or not isinstance(index, int)
        or isinstance(index, bool)
        or not isinstance(attempt, int)
        or isinstance(attempt, bool)
        or attempt < 1
        or event not in ("accepted", "revoked")
        or not isinstance(signature, str)
        or not isinstance(mac, str)
    ):
        raise LedgerError(f"{where} is not a ledger entry this version writes")
    entry = LedgerEntry(task_id, index, attempt, event, signature, mac, number)
    if not hmac.compare_digest(signer.ledger_mac(previous, entry.fields()), mac):
        raise LedgerError(
            f"{where} does not match its chain: a line was changed, removed, inserted or reordered, or "
            "the ledger is another run's"
        )
    return entry


def _read_ledger(path: Path, signer: RecordSigner, head: LedgerHead | None) -> LedgerState:
    try:
        data = _read_regular(path)
    except ValueError as error:
        raise LedgerError(f"{LEDGER_FILE} is {error}") from error
    if data is None:
        raise LedgerError(f"{LEDGER_FILE} is missing")
    state = LedgerState()
    start = 0
    while (end := data.find(b"\n", start)) != -1:
        state.add(_entry(signer, state.mac, data[start:end], state.entries + 1))
        start = end + 1
        if (
            head is not None
            and state.entries == head.entries
            and not hmac.compare_digest(state.mac, head.mac)
        ):
            raise LedgerError(
                f"{LEDGER_FILE} does not pass through the head its writer kept: it was rewritten or "
                "rolled back"
            )
    state.valid_bytes = start  # anything after: a last line a crash cut short, never accepted
    if head is not None and state.entries < head.entries:
        raise LedgerError(
            f"{LEDGER_FILE} ends after entry {state.entries} of the {head.entries} its writer appended: it "
            "was cut short or rolled back"
        )
    return state


def read_head(path: Path) -> LedgerHead | None:
    """The ledger head kept at ``path``; None when there is none. Raises LedgerError for a file that
    is not a head."""
    try:
        data = _read_regular(path, _HEAD_BYTES)
    except ValueError as error:
        raise LedgerError(f"the ledger head {path} is {error}") from error
    if data is None:
        return None
    parts = data.decode("ascii", errors="replace").split()
    if len(data) != _HEAD_BYTES or len(parts) != 2 or not parts[0].isdigit():
        raise LedgerError(f"the ledger head {path} is not a ledger head")
    entries = int(parts[0])
    return LedgerHead(entries, parts[1] if entries else "")


@dataclass(frozen=True)
class Ledger:
    """Where a run's ledger is, its head, and the signer of both: what a writer needs (picklable: the
    result-file helper gets it on its stdin)."""

    signer: RecordSigner
    path: Path
    """``<output>/ledger.jsonl``."""
    head: Path | None = None
    """The head file beside the run's key; None: not kept (a test's ledger)."""

    def create(self) -> None:
        """A new run's empty ledger, and its head (0600)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        self.path.unlink(missing_ok=True)
        os.close(os.open(self.path, flags, 0o666))
        if self.head is not None:
            self.head.unlink(missing_ok=True)
            fd = os.open(self.head, flags, 0o600)
            try:
                os.write(fd, LedgerHead(0, "").text())
            finally:
                os.close(fd)

    def read(self) -> LedgerState:
        """The ledger, every line checked, and checked against its head when one is kept; raises
        LedgerError when it cannot be trusted (its head file missing included)."""
        head = None
        if self.head is not None:
            head = read_head(self.head)
            if head is None:
                raise LedgerError(f"the ledger head {self.head} is missing")
        return _read_ledger(self.path, self.signer, head)

    def open(self) -> LedgerAppender:
        """The ledger, read and checked, opened to append to (a line a crash cut short is dropped)."""
        return LedgerAppender(self, self.read())


class LedgerAppender:
    """Appends to a run's ledger: one ``write`` of one line per entry (O_APPEND), the head kept after
    each batch (:meth:`keep_head`: one ``pwrite`` over the old head, in place: a rename per batch cost
    a hundred times more). For one thread of one process at a time."""

    def __init__(self, ledger: Ledger, state: LedgerState) -> None:
        self.ledger = ledger
        self.state = state
        self._fd = os.open(ledger.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        self._head = -1
        try:
            if os.fstat(self._fd).st_size != state.valid_bytes:
                os.ftruncate(self._fd, state.valid_bytes)  # a last line a crash cut short
            if ledger.head is not None:
                self._head = os.open(ledger.head, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except BaseException:
            os.close(self._fd)
            raise
        self._kept = state.entries

    @property
    def signer(self) -> RecordSigner:
        return self.ledger.signer

    def next_attempt(self, task_id: str, trial_index: int) -> int:
        return self.state.next_attempt(task_id, trial_index)

    def append(
        self, task_id: str, trial_index: int, attempt: int, event: LedgerEvent, signature: str
    ) -> LedgerEntry:
        """Append the entry (``signature``: sha256 of the record's signature.yaml)."""
        fields = {
            "task_id": task_id,
            "trial_index": trial_index,
            "attempt": attempt,
            "event": event,
            "signature": signature,
        }
        mac = self.signer.ledger_mac(self.state.mac, fields)
        entry = LedgerEntry(task_id, trial_index, attempt, event, signature, mac, self.state.entries + 1)
        line = entry.text()
        if os.write(self._fd, line) != len(line):
            raise OSError(f"{self.ledger.path}: a ledger line was written short")
        self.state.add(entry)
        self.state.valid_bytes += len(line)
        return entry

    def accept(self, task_id: str, trial_index: int, attempt: int, signature_bytes: bytes) -> LedgerEntry:
        """Accept the record whose signature.yaml holds ``signature_bytes``."""
        digest = hashlib.sha256(signature_bytes).hexdigest()
        return self.append(task_id, trial_index, attempt, "accepted", digest)

    def revoke(self, entry: LedgerEntry) -> LedgerEntry:
        """Revoke an accepted record (found tampered): its trial runs again, as its next attempt."""
        return self.append(entry.task_id, entry.trial_index, entry.attempt, "revoked", entry.signature)

    def keep_head(self) -> None:
        """Write the head, if entries were appended since it was last written."""
        if self._head >= 0 and self.state.entries != self._kept:
            os.pwrite(self._head, self.state.head.text(), 0)
            self._kept = self.state.entries

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self.keep_head()
            finally:
                os.close(self._fd)
                self._fd = -1
                if self._head >= 0:
                    os.close(self._head)
                    self._head = -1


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


def _listing(directory: Path) -> list[str] | None:
    """The names in ``directory``; None when there is nothing at that path."""
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return None
    except OSError:  # not a directory (a file planted in its place): the caller says so
        return []


def check_record(
    directory: Path, signer: RecordSigner, task_id: str, trial_index: int, accepted: LedgerEntry | None
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
        raw = _read_regular(directory / SIGNATURE_FILE, _MAX_SIGNATURE_BYTES)
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
    expected = {*digests, SIGNATURE_FILE} | ({GRADE_PENDING} if pending else set[str]())
    contents: dict[str, bytes] = {}
    for name, digest in sorted(digests.items()):
        if "/" in name or name in ("", ".", ".."):
            return _tampered(f"{SIGNATURE_FILE} lists {name!r}, which is not a file of the trial", name)
        path = directory / (GRADE_PENDING if pending and name == "grade.yaml" else name)
        try:
            data = _read_regular(path)
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


def check_manifest(manifest: Mapping[str, Any], signer: RecordSigner) -> str | None:
    """None when ``run.yaml`` (as read) carries the signature of its other keys; else what is wrong."""
    signature = manifest.get("signature")
    if not isinstance(signature, str):
        return "it carries no signature"
    rest = {name: value for name, value in manifest.items() if name != "signature"}
    if not hmac.compare_digest(signer.manifest_signature(rest), signature):
        return "its signature does not match: it was changed after the run wrote it"
    return None
