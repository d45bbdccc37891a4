"""A helper process that writes trials' result files: the host sends it documents, it sends back an ack.

Rendering a trial's documents as YAML costs about a millisecond of CPU (PyYAML's representer is Python,
over its C emitter) -- on the host's own core, under the GIL its event loop needs for every trial. The
helper does it on another core. It is ``python -m tolokaforge.host.file_writer_main``: started as a
program, it imports nothing of the caller's (unlike multiprocessing's spawn, which re-runs the caller's
main module), and it stops when its stdin closes.

Frames both ways are a 4-byte big-endian length, then the payload: a pickled
:class:`~tolokaforge.host.results.TrialFiles` to the helper (only this host writes to it), and an
empty payload back for done, or the pickled exception when the files could not be written (raised
here as it was there: a ``FileExistsError`` stays one).
"""

from __future__ import annotations

import contextlib
import pickle
import struct
import subprocess
import sys
import threading
from typing import IO

from .results import TrialFiles

__all__ = ["FileWriterProcess", "HelperGone", "WriteFailed"]

_HEADER = struct.Struct(">I")


class HelperGone(Exception):
    """The helper died or could not start: these files were not written by it."""


class WriteFailed(OSError):
    """The helper could not write the files, for a reason it could not send as itself."""


class FileWriterProcess:
    """One helper process; :meth:`write` is blocking and for one thread at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tolokaforge.host.file_writer_main"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def write(self, files: TrialFiles) -> None:
        """Have the helper write ``files``; returns once they are on disk."""
        payload = pickle.dumps(files, protocol=pickle.HIGHEST_PROTOCOL)
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
        if answer:
            raise pickle.loads(answer)

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
    """The helper's loop: write each trial's files, answer each request, until ``requests`` ends."""
    while (payload := _read_frame(requests)) is not None:
        files: TrialFiles = pickle.loads(payload)
        try:
            files.store()
            answer = b""
        except Exception as error:  # the host raises it: a failed write is the run's to report
            try:
                answer = pickle.dumps(error)
            except Exception:  # an exception that does not pickle: its text, then
                answer = pickle.dumps(
                    WriteFailed(f"writing {files.directory}: {type(error).__name__}: {error}")
                )
        answers.write(_HEADER.pack(len(answer)) + answer)
        answers.flush()
