"""Writing a run's trial files without holding up its event loop.

The loop builds each trial's documents (the summary needs them) and hands them on; a background
thread writes them, in the order the trials finished, grade.yaml last, so a trial is finished on disk
exactly when its grade.yaml appears.

A run of :data:`HELPER_MIN_TRIALS` trials or more also starts a file-writer helper process for its
duration (file_writer.py): the thread passes it the documents, and it renders the YAML (about a
millisecond of Python per trial) and writes the files on another core, off the GIL the loop needs.
Starting it costs about 0.1 s of CPU (it imports PyYAML and yaml_files.py, not the host package),
which a run of a few dozen trials wins back: measured on the retail pack at concurrency 16 on two
cores, an 87-trial embedded run makes 73-74 trials/s with it and 66-69 without. A smaller run's thread renders and writes the files itself. If the helper cannot start or dies, the files it had not
acknowledged are written by the thread instead: nothing a run finished is lost. A write that fails
for its own reasons (a full disk) is raised by the next :meth:`ResultWriter.write` or by
:meth:`ResultWriter.drain`, which a run awaits before it summarises.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..results.outcome import TrialOutcome
from .file_writer import FileWriterProcess, HelperGone, store_each
from .ledger import Ledger, LedgerAppender
from .redaction import Redactor
from .trial_files import WrittenTrial, render_trial
from .yaml_files import TrialFiles

__all__ = ["HELPER_MIN_TRIALS", "ResultWriter"]

log = logging.getLogger(__name__)

HELPER_MIN_TRIALS = 50
"""The smallest run that writes its files through a helper process."""


class ResultWriter:
    """One run's trial files; ``helper``: through a file-writer process (started at the first write).

    Trials queue up here and the writer thread takes every queued trial at each turn, so a burst of
    trials finishing together costs the thread one wake-up (and the helper one round trip), not one each.
    """

    def __init__(
        self, *, helper: bool, ledger: Ledger | None = None, redactor: Redactor | None = None
    ) -> None:
        """``ledger``: the run's, which signs each finished trial's record and accepts it (records.py);
        ``redactor`` clears secrets from its documents."""
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tolokaforge-results")
        self._lock = threading.Lock()
        self._queue: list[tuple[TrialFiles, Future[None]]] = []
        self._scheduled = False
        """A flush job is submitted and has not yet taken the queue empty."""
        self._last: Future[None] | None = None
        """The latest trial's write: batches go in order, so once it is done every write is."""
        self._failure: BaseException | None = None
        """The first write that failed (raised by the next write or the drain)."""
        self._use_helper = helper
        self._helper: FileWriterProcess | None = None
        self._ledger = ledger
        self._appender: LedgerAppender | None = None
        """The ledger as this process appends to it (opened when this process first writes)."""
        self._redactor = redactor

    def write(
        self, output: Path, outcome: TrialOutcome, configured: Sequence[str] = (), *, finished: bool = True
    ) -> WrittenTrial:
        """The trial's documents; its files are on disk once :meth:`drain` returns."""
        if self._failure is not None:
            raise self._failure
        written, files = render_trial(output, outcome, configured, finished=finished, redactor=self._redactor)
        future: Future[None] = Future()
        with self._lock:
            self._queue.append((files, future))
            schedule, self._scheduled = not self._scheduled, True
        if schedule:
            self._pool.submit(self._flush)
        self._last = future
        return written

    async def drain(self) -> None:
        if self._last is not None:
            with contextlib.suppress(Exception):  # the first failure is the one to raise
                await asyncio.wrap_future(self._last)
        if self._failure is not None:
            raise self._failure

    def close(self) -> None:
        """Waits for the writes still running (an interrupted run keeps every trial it finished), then
        stops the helper."""
        self._pool.shutdown(wait=True)
        if self._helper is not None:
            self._helper.close()
            self._helper = None
        if self._appender is not None:
            self._appender.close()
            self._appender = None

    def _flush(self) -> None:
        """On the writer thread: every queued trial, a batch at a time, until the queue is empty."""
        while True:
            with self._lock:
                batch, self._queue = self._queue, []
                if not batch:
                    self._scheduled = False
                    return
            try:
                errors = self._write_batch([files for files, _ in batch])
            except BaseException as error:  # a defect here must not leave a drain waiting forever
                errors = [error] * len(batch)
            for (_, future), error in zip(batch, errors, strict=True):
                if error is None:
                    future.set_result(None)
                else:
                    self._failure = self._failure or error
                    future.set_exception(error)

    def _write_batch(self, batch: list[TrialFiles]) -> list[BaseException | None]:
        """Through the helper when there is one, else here."""
        if self._use_helper and self._helper is None:
            try:
                self._helper = FileWriterProcess(self._ledger)
            except OSError as error:
                log.warning("no result-file helper (%s): files are written by this process", error)
                self._use_helper = False
        if self._helper is not None:
            try:
                return self._helper.write_batch(batch)
            except HelperGone as error:
                log.warning("%s; this process writes the run's files from here on", error)
                self._helper.close()
                self._helper, self._use_helper = None, False
        if self._ledger is not None and self._appender is None:
            # Read from the file: a helper that died may have appended to it (its chain goes on).
            self._appender = self._ledger.open()
        return store_each(batch, self._appender)  # failures are raised by the run's next write or its drain
