"""The engine/runner wire-protocol version: the one number both sides compare.

``ENGINE_PROTOCOL_VERSION`` is what the host sends as ``RegisterTrialRequest.engine_protocol_version``
and, the gate being a lower bound, also the minimum a runner built from this tree accepts: an engine
and a runner from one tree always agree, and a skewed pair fails at RegisterTrial before any tokens
are spent.

History:
    1 -- the first that sends ``ExecuteToolRequest.call_id``.
    2 -- the first that omits ``user_simulator.first_message`` and ``user_simulator.user_context``
         from the trial spec.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ENGINE_PROTOCOL_VERSION", "MIN_ENGINE_PROTOCOL_VERSION", "check_engine_protocol_version"]

ENGINE_PROTOCOL_VERSION: Final = 2
"""The version this engine speaks."""

MIN_ENGINE_PROTOCOL_VERSION: Final = ENGINE_PROTOCOL_VERSION
"""The lowest engine version a runner from this tree registers (the same number, by design)."""


def check_engine_protocol_version(engine_version: int) -> str | None:
    """Return why a registration from ``engine_version`` must be refused, or None to accept it.

    The message names both versions, so a skewed engine/runner pair can be told apart from a bad spec.
    """
    if engine_version < MIN_ENGINE_PROTOCOL_VERSION:
        return (
            f"engine protocol version {engine_version} is below this runner's minimum "
            f"{MIN_ENGINE_PROTOCOL_VERSION}: rebuild the runner from the engine you run, or run an "
            f"engine that speaks version {MIN_ENGINE_PROTOCOL_VERSION} or newer"
        )
    return None
