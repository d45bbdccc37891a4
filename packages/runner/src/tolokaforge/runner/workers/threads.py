"""Trusted mode's thread pool: daemon threads, and a call that overstays is abandoned, not waited for.

``concurrent.futures.ThreadPoolExecutor`` joins its threads at interpreter exit and reuses a thread
only once its job returns, so a tool that never returns holds a slot forever and keeps the process
from exiting. Here every thread is a daemon; abandoning a call hands its slot to a fresh thread at
once, and the abandoned one (still running pack code) is counted so HealthCheck can say so.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["DaemonPool"]

_STOP = object()


class _Job:
    __slots__ = ("fn", "future", "thread")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.future: Future[Any] = Future()
        self.thread: threading.Thread | None = None


class DaemonPool:
    def __init__(self, max_workers: int, name: str = "tolokaforge-tool") -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._name = name
        self._lock = threading.Lock()
        self._abandoned: set[threading.Thread] = set()
        self._threads: set[threading.Thread] = set()
        for _ in range(max_workers):
            self._spawn()

    def submit(self, fn: Callable[[], Any]) -> tuple[Future[Any], _Job]:
        job = _Job(fn)
        self._queue.put(job)
        return job.future, job

    def abandon(self, job: _Job) -> None:
        """Give up on ``job``: a slot that runs it is replaced, so the pool keeps its size."""
        if job.future.cancel():
            return  # never started
        with self._lock:
            thread = job.thread
            if thread is None or thread not in self._threads or not thread.is_alive():
                return
            self._threads.discard(thread)
            self._abandoned.add(thread)
        self._spawn()

    @property
    def abandoned(self) -> int:
        """Abandoned threads still running pack code."""
        with self._lock:
            self._abandoned = {thread for thread in self._abandoned if thread.is_alive()}
            return len(self._abandoned)

    def shutdown(self) -> None:
        with self._lock:
            count = len(self._threads)
        for _ in range(count):
            self._queue.put(_STOP)

    def _spawn(self) -> None:
        thread = threading.Thread(target=self._work, name=self._name, daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            job = self._queue.get()
            if job is _STOP:
                return
            assert isinstance(job, _Job)
            job.thread = me
            if not job.future.set_running_or_notify_cancel():
                continue
            try:
                result = job.fn()
            except BaseException as error:  # SystemExit & co. fail the job, not the thread
                job.future.set_exception(error)
            else:
                job.future.set_result(result)
            with self._lock:
                if me not in self._threads:
                    return  # abandoned: a replacement has taken this slot
