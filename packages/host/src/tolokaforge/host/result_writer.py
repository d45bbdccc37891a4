"""Writing a run's trial files without holding up its event loop.

The loop builds each trial's documents (the summary needs them) and hands them on; a background
thread passes them to the file-writer helper process (file_writer.py), which renders the YAML and
writes the files on another core, grade.yaml last, so a trial is finished on disk exactly when its
grade.yaml appears.

The helper is started on first use and kept for the life of this process (later runs reuse it). If it
cannot start or dies, the files it had not acknowledged are written by this process instead: nothing
a run finished is lost. A write that fails for its own reasons (a full disk) is raised by the next
:meth:`ResultWriter.write` or by :meth:`ResultWriter.drain`, which a run awaits before it summarises.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from .conductor import TrialOutcome
from .file_writer import FileWriterProcess, HelperGone
from .results import TrialFiles, WrittenTrial, render_trial

__all__ = ["ResultWriter"]

log = logging.getLogger(__name__)

_lock = threading.Lock()
_helper: FileWriterProcess | None = None


def _helper_process() -> FileWriterProcess | None:
    global _helper
    with _lock:
        if _helper is None or not _helper.alive:
            try:
                _helper = FileWriterProcess()
            except OSError as error:
                log.warning("no result-file helper (%s): files are written by this process", error)
                return None
            atexit.register(_helper.close)
        return _helper


def _write(files: TrialFiles) -> None:
    helper = _helper_process()
    if helper is not None:
        try:
            helper.write(files)
            return
        except HelperGone as error:
            log.warning("%s; writing %s here", error, files.directory)
    files.store()


class ResultWriter:
    """One run's trial files, written in the order the trials finished."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tolokaforge-results")
        self._pending: list[Future[None]] = []

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
        still.append(self._pool.submit(_write, files))
        self._pending = still
        return written

    async def drain(self) -> None:
        pending, self._pending = self._pending, []
        await asyncio.gather(*(asyncio.wrap_future(future) for future in pending))

    def close(self) -> None:
        """Waits for the writes still running (an interrupted run keeps every trial it finished)."""
        self._pool.shutdown(wait=True)
