"""What a runner keeps of what the host sends once (tasks, code bundles, tables), and who is sending what.

A run's first trials start together, and most of them need the same pack code and often the same
tables. Rather than each sending the same hundreds of kilobytes, one registration sends each key and
the others wait for its answer, then name the key by digest. A registration never holds a claim while
it waits for another's, so two of them can never wait for each other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

__all__ = ["SentOnce"]


class SentOnce:
    """Keys (task keys and part digests, ``TaskWire.keys``) a runner keeps, as far as the host knows."""

    def __init__(self) -> None:
        self.held: set[str] = set()
        """Keys the runner answered a registration for (it may still have forgotten one since)."""
        self._sending: dict[str, asyncio.Event] = {}

    async def claim(self, keys: Sequence[str]) -> tuple[str, ...]:
        """Wait until no other registration is sending any of ``keys``, then claim those not held.

        The caller sends the claimed keys' JSON and must :meth:`settle` them, whatever happens.
        """
        while True:
            busy = next((self._sending[key] for key in keys if key in self._sending), None)
            if busy is None:
                break
            await busy.wait()
        mine = tuple(key for key in keys if key not in self.held)
        for key in mine:
            self._sending[key] = asyncio.Event()
        return mine

    def settle(self, claimed: Iterable[str], *, held: bool) -> None:
        """End the claim on ``claimed``; ``held``: the runner keeps them now (its registration succeeded)."""
        for key in claimed:
            if held:
                self.held.add(key)
            event = self._sending.pop(key, None)
            if event is not None:
                event.set()

    def forget(self, keys: Iterable[str]) -> None:
        """The runner said it keeps one of these no longer (restarted, or evicted it): send them again."""
        self.held.difference_update(keys)
