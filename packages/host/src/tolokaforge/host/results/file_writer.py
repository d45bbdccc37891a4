"""A helper process that writes trials' result files: the host sends it documents, it sends back an ack.

Rendering a trial's documents as YAML costs about a millisecond of CPU (PyYAML's representer is Python,
over its C emitter) -- on the host's own core, under the GIL its event loop needs for every trial. The
helper does it on another core. It is ``python -m tolokaforge.host.results.file_writer_main``: started as a
program, it imports nothing of the caller's (unlike multiprocessing's spawn, which re-runs the caller's
main module), and it stops when its stdin closes.

Frames both ways are a 4-byte big-endian length, then the payload. The first frame to the helper is
the run's pickled :class:`~tolokaforge.host.results.records.Ledger` (its signer, where the ledger and its head
are; or None): the signing key reaches the helper through its stdin pipe only, never its argv,
environment or a file. Then each frame is a pickled list of
:class:`~tolokaforge.host.results.yaml_files.TrialFiles` to the helper (only this host writes to it), and back
an empty payload when all were written, or the pickled list of each trial's exception (None where its
files were written; raised here as it was there: a ``FileExistsError`` stays one).

Whoever writes (the helper, or the host's thread) opens the ledger itself, from the file: the thread
that takes over from a helper that died continues the chain where the helper left it.
:func:`store_trial` writes one trial: whatever an earlier attempt left goes first (grade.yaml before
anything), then the documents, then, for a finished trial, ``signature.yaml``, grade.yaml as
``grade.yaml.tmp``, the ledger's line accepting the record, and the rename that makes it finished.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from .attachments import ATTACHMENTS_DIR, is_attachment_path
from .ledger import Ledger, LedgerAppender
from .records import GRADE_PENDING, SIGNATURE_FILE, WRITTEN_FILES
from .yaml_files import TrialFiles, dump_yaml

__all__ = ["FileWriterProcess", "HelperGone", "WriteFailed", "store_each", "store_trial"]

_HEADER = struct.Struct(">I")


class HelperGone(Exception):
    """The helper died or could not start: these files were not written by it."""


class WriteFailed(OSError):
    """The helper could not write the files, for a reason it could not send as itself."""


class FileWriterProcess:
    """One helper process; :meth:`write` is blocking and for one thread at a time."""

    def __init__(self, ledger: Ledger | None = None) -> None:
        """``ledger``: the run's, to sign and accept each finished trial's record (None: unsigned)."""
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tolokaforge.host.results.file_writer_main"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        payload = pickle.dumps(ledger, protocol=pickle.HIGHEST_PROTOCOL)
        assert self._process.stdin is not None
        with contextlib.suppress(OSError):  # it died at once: the first write_batch says so (HelperGone)
            self._process.stdin.write(_HEADER.pack(len(payload)) + payload)
            self._process.stdin.flush()

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def write(self, files: TrialFiles) -> None:
        """Have the helper write ``files``; returns once they are on disk."""
        (error,) = self.write_batch([files])
        if error is not None:
            raise error

    def write_batch(self, batch: Sequence[TrialFiles]) -> list[BaseException | None]:
        """Have the helper write every trial's files in ``batch``, in order, in one round trip; returns
        once they are on disk, with each trial's failure (None: written).

        One round trip for many trials matters under load: the calling thread needs the GIL to send and
        again to take the answer, and while the event loop is busy each of those waits for a switch
        interval (5 ms); one batch per wake-up keeps the helper fed however many trials finished at once.
        """
        payload = pickle.dumps(list(batch), protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            stdin, stdout = self._process.stdin, self._process.stdout
            assert stdin is not None and stdout is not None
            try:
                stdin.write(_HEADER.pack(len(payload)) + payload)
                stdin.flush()
                answer = _read_frame(stdout)
            except (OSError, ValueError) as error:  # a broken pipe, or a pipe closed meanwhile
                raise HelperGone(f"the result-file helper is gone: {error}") from error
        if answer is None:
            raise HelperGone("the result-file helper is gone (it closed its output)")
        if not answer:
            return [None] * len(batch)
        errors: list[BaseException | None] = pickle.loads(answer)
        return errors

    def close(self) -> None:
        """Close its stdin (it exits once the writes sent are done) and wait for it."""
        with self._lock:
            if self._process.stdin is not None:
                with contextlib.suppress(OSError):
                    self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()


def _read_frame(stream: IO[bytes]) -> bytes | None:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (length,) = _HEADER.unpack(header)
    payload = stream.read(length)
    return payload if len(payload) == length else None


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """The helper's loop: take the ledger, then write each batch's files and answer each batch, until
    ``requests`` ends.

    The answer is empty when every trial's files were written, else one entry per trial: None, or why
    its files could not be written.
    """
    first = _read_frame(requests)
    if first is None:
        return
    ledger: Ledger | None = pickle.loads(first)
    appender: LedgerAppender | None = None
    try:
        while (payload := _read_frame(requests)) is not None:
            batch: list[TrialFiles] = pickle.loads(payload)
            try:
                if ledger is not None and appender is None:
                    appender = ledger.open()
            except Exception as error:  # a ledger that cannot be trusted: nothing is signed into it
                errors: list[BaseException | None] = [error] * len(batch)
            else:
                errors = store_each(batch, appender)
            answer = (
                b""
                if all(error is None for error in errors)
                else pickle.dumps([_sendable(e, f) for e, f in zip(errors, batch, strict=True)])
            )
            answers.write(_HEADER.pack(len(answer)) + answer)
            answers.flush()
    finally:
        if appender is not None:
            appender.close()


def store_each(
    batch: Sequence[TrialFiles], ledger: LedgerAppender | None = None
) -> list[BaseException | None]:
    """Write every trial's files (each finished one signed and accepted into ``ledger``), in order;
    each trial's failure (None: written), the others go on. The ledger's head is kept once per batch."""
    errors: list[BaseException | None] = []
    try:
        for files in batch:
            try:
                store_trial(files, ledger)
            except Exception as error:  # the host raises it: a failed write is the run's to report
                errors.append(error)
            else:
                errors.append(None)
    finally:
        if ledger is not None:
            ledger.keep_head()
    return errors


def store_trial(files: TrialFiles, ledger: LedgerAppender | None = None) -> None:
    """Write one trial's files; a finished trial's grade.yaml last, by rename, once ``ledger`` (when
    given) accepted the record signed just before (module docstring)."""
    directory = files.directory
    names = {name for name, _ in files.documents}
    _fresh_directory(directory, names)
    contents: dict[str, bytes] = {}
    for name, document in files.documents:
        if isinstance(document, bytes):
            data = document
        else:
            data = (document if isinstance(document, str) else dump_yaml(document)).encode("utf-8")
        contents[name] = data
        if name != "grade.yaml":  # read only once grade.yaml says the trial finished: written in place
            if "/" in name:
                if not is_attachment_path(name):
                    raise ValueError(f"{name!r} is not a file a trial's directory holds")
                _attachments_folder(directory)
            _write_new(directory / name, data)
            continue
        pending = directory / GRADE_PENDING
        if ledger is None:
            _write_new(pending, data)
        else:
            task_id, index = files.task_id, files.trial_index
            attempt = ledger.next_attempt(task_id, index)
            signature = ledger.signer.trial_signature(task_id, index, contents, attempt)
            signed = dump_yaml(signature).encode("utf-8")
            _write_new(directory / SIGNATURE_FILE, signed)
            _write_new(pending, data)
            ledger.accept(task_id, index, attempt, signed)
        os.replace(pending, directory / name)


def _fresh_directory(directory: Path, names: set[str]) -> None:
    """``directory``, created, or cleared of what an earlier attempt wrote there: grade.yaml first (the
    trial is unfinished from then until the new one is in place), then every file a writer writes that
    this attempt does not (a judge's transcript, a signature): nothing stale stays beside the new
    record. Anything else is left alone (a record with it fails its check). A symlink in the
    directory's place is removed, never written through."""
    try:
        os.mkdir(directory)
        return
    except FileNotFoundError:
        directory.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(directory)
        return
    except FileExistsError:
        pass
    if os.path.islink(directory):
        os.unlink(directory)
        os.mkdir(directory)
        return
    if not os.path.isdir(directory):  # a file in its place: not the writer's to remove
        raise FileExistsError(errno.EEXIST, "a file is where the trial's directory belongs", str(directory))
    (directory / "grade.yaml").unlink(missing_ok=True)
    for name in WRITTEN_FILES:
        if name not in names:
            with contextlib.suppress(IsADirectoryError):  # not a writer's: the record's check says so
                (directory / name).unlink(missing_ok=True)
    _clear_attachments(directory / ATTACHMENTS_DIR, names)


def _clear_attachments(folder: Path, names: set[str]) -> None:
    """An earlier attempt's attachments this attempt does not write again go (the folder too, once
    empty); a symlink in the folder's place is removed, never followed."""
    if os.path.islink(folder):
        os.unlink(folder)
        return
    try:
        listing = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in listing:
        path = f"{ATTACHMENTS_DIR}/{entry}"
        if is_attachment_path(path) and path not in names:
            with contextlib.suppress(IsADirectoryError):
                (folder / entry).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty: something not a writer's stays, and fails the check
        os.rmdir(folder)


def _attachments_folder(directory: Path) -> None:
    """The trial's attachments folder, made a real directory (never written through a symlink)."""
    folder = directory / ATTACHMENTS_DIR
    if os.path.islink(folder):
        os.unlink(folder)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder)


def _write_new(path: Path, data: bytes) -> None:
    """Write ``path`` as a new file: whatever was there (a symlink planted to redirect the write
    elsewhere, say) is removed first, never written through."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _sendable(error: BaseException | None, files: TrialFiles) -> BaseException | None:
    """``error`` if it pickles, else a :class:`WriteFailed` with its text."""
    if error is None:
        return None
    try:
        pickle.dumps(error)
    except Exception:
        return WriteFailed(f"writing {files.directory}: {type(error).__name__}: {error}")
    return error
