"""The run's ledger of accepted records (records.py says why it exists): one chained-HMAC line per
record the writer accepts or ``--resume`` revokes, in ``ledger.jsonl`` of the output folder, and its
*head* (the number of lines and the last HMAC), kept beside the run's key so that a ledger cut short
or rolled back is caught too.

Standard library and PyYAML only: the result-file helper process imports this.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from .records import LEDGER_FILE, LedgerEvent, RecordSigner, read_regular

__all__ = ["Ledger", "LedgerAppender", "LedgerEntry", "LedgerError", "LedgerHead", "LedgerState", "read_head"]

_HEAD_BYTES = 86


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
        data = read_regular(path)
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
        data = read_regular(path, _HEAD_BYTES)
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
