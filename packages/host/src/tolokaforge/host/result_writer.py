"""Writing a run's trial files without holding up its event loop.

The loop builds each trial's documents (the summary needs them) and hands them on; a background
thread writes them, in the order the trials finished, grade.yaml last, so a trial is finished on disk
exactly when its grade.yaml appears.

A run of :data:`HELPER_MIN_TRIALS` trials or more also starts a file-writer helper process for its
duration (file_writer.py): the thread passes it the documents, and it renders the YAML (about a
millisecond of Python per trial) and writes the files on another core, off the GIL the loop needs.
Starting it costs about 0.4 s of CPU (it imports the host package), which a smaller run does not win
back: measured on the retail pack at concurrency 16 on two cores, the helper took a 290-trial run from
92 to 101 trials/s, while on an 87-trial run the difference was lost in run-to-run noise (65-82
trials/s either way). A smaller run's thread renders and writes the files itself. If the helper cannot start or dies, the files it had not
acknowledged are written by the thread instead: nothing a run finished is lost. A write that fails
for its own reasons (a full disk) is raised by the next :meth:`ResultWriter.write` or by
:meth:`ResultWriter.drain`, which a run awaits before it summarises.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from .conductor import TrialOutcome
from .file_writer import FileWriterProcess, HelperGone
from .results import TrialFiles, WrittenTrial, render_trial

__all__ = ["HELPER_MIN_TRIALS", "ResultWriter"]

log = logging.getLogger(__name__)

HELPER_MIN_TRIALS = 200
"""The smallest run that writes its files through a helper process."""


class ResultWriter:
    """One run's trial files; ``helper``: through a file-writer process (started at the first write)."""

    def __init__(self, *, helper: bool) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tolokaforge-results")
        self._pending: list[Future[None]] = []
        self._use_helper = helper
        self._helper: FileWriterProcess | None = None

    def write(
        self, output: Path, outcome: TrialOutcome, configured: Sequence[str] = (), *, finished: bool = True
    ) -> WrittenTrial:
        """The trial's documents; its files are on disk once :meth:`drain` returns."""
        still: list[Future[None]] = []
        for future in self._pending:
            if not future.done():
                still.append(future)
            elif (error := future.exception()) is not None:
                raise error
        written, files = render_trial(output, outcome, configured, finished=finished)
        still.append(self._pool.submit(self._write, files))
        self._pending = still
        return written

    async def drain(self) -> None:
        pending, self._pending = self._pending, []
        await asyncio.gather(*(asyncio.wrap_future(future) for future in pending))

    def close(self) -> None:
        """Waits for the writes still running (an interrupted run keeps every trial it finished), then
        stops the helper."""
        self._pool.shutdown(wait=True)
        if self._helper is not None:
            self._helper.close()
            self._helper = None

    def _write(self, files: TrialFiles) -> None:
        """On the writer thread: through the helper when there is one, else here."""
        if self._use_helper and self._helper is None:
            try:
                self._helper = FileWriterProcess()
            except OSError as error:
                log.warning("no result-file helper (%s): files are written by this process", error)
                self._use_helper = False
        if self._helper is not None:
            try:
                self._helper.write(files)
                return
            except HelperGone as error:
                log.warning("%s; this process writes the run's files from here on", error)
                self._helper.close()
                self._helper, self._use_helper = None, False
        files.store()
