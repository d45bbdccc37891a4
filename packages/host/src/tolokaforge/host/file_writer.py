"""A helper process that writes trials' result files: the host sends it documents, it sends back an ack.

Rendering a trial's documents as YAML costs about a millisecond of CPU (PyYAML's representer is Python,
over its C emitter) -- on the host's own core, under the GIL its event loop needs for every trial. The
helper does it on another core. It is ``python -m tolokaforge.host.file_writer_main``: started as a
program, it imports nothing of the caller's (unlike multiprocessing's spawn, which re-runs the caller's
main module), and it stops when its stdin closes.

Frames both ways are a 4-byte big-endian length, then the payload. The first frame to the helper is
the run's pickled :class:`~tolokaforge.host.records.RecordSigner` (or None): the signing key reaches the
helper through its stdin pipe only, never its argv, environment or a file. Then each frame is a pickled
list of :class:`~tolokaforge.host.yaml_files.TrialFiles` to the helper (only this host writes to it),
and back an empty payload when all were written, or the pickled list of each trial's exception (None
where its files were written; raised here as it was there: a ``FileExistsError`` stays one).
"""

from __future__ import annotations

import contextlib
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import IO

from .records import RecordSigner
from .yaml_files import TrialFiles

__all__ = ["FileWriterProcess", "HelperGone", "WriteFailed", "store_each"]

_HEADER = struct.Struct(">I")


class HelperGone(Exception):
    """The helper died or could not start: these files were not written by it."""


class WriteFailed(OSError):
    """The helper could not write the files, for a reason it could not send as itself."""


class FileWriterProcess:
    """One helper process; :meth:`write` is blocking and for one thread at a time."""

    def __init__(self, signer: RecordSigner | None = None) -> None:
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tolokaforge.host.file_writer_main"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        payload = pickle.dumps(signer, protocol=pickle.HIGHEST_PROTOCOL)
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
    """The helper's loop: take the signer, then write each batch's files and answer each batch, until
    ``requests`` ends.

    The answer is empty when every trial's files were written, else one entry per trial: None, or why
    its files could not be written.
    """
    first = _read_frame(requests)
    if first is None:
        return
    signer: RecordSigner | None = pickle.loads(first)
    while (payload := _read_frame(requests)) is not None:
        batch: list[TrialFiles] = pickle.loads(payload)
        errors = store_each(batch, signer)
        answer = (
            b""
            if all(error is None for error in errors)
            else pickle.dumps([_sendable(e, f) for e, f in zip(errors, batch, strict=True)])
        )
        answers.write(_HEADER.pack(len(answer)) + answer)
        answers.flush()


def store_each(batch: Sequence[TrialFiles], signer: RecordSigner | None = None) -> list[BaseException | None]:
    """Write every trial's files (signed by ``signer``), in order; each trial's failure (None: written),
    the others go on."""
    errors: list[BaseException | None] = []
    for files in batch:
        try:
            files.store(signer)
        except Exception as error:  # the host raises it: a failed write is the run's to report
            errors.append(error)
        else:
            errors.append(None)
    return errors


def _sendable(error: BaseException | None, files: TrialFiles) -> BaseException | None:
    """``error`` if it pickles, else a :class:`WriteFailed` with its text."""
    if error is None:
        return None
    try:
        pickle.dumps(error)
    except Exception:
        return WriteFailed(f"writing {files.directory}: {type(error).__name__}: {error}")
    return error
