"""Tolokaforge core: what host, runner and db-service share (protocol version, models, algorithms).

Imports flow down only: ``tolokaforge.contracts`` <- ``tolokaforge.core`` <- {db, runner, host}.
"""

from __future__ import annotations

from .protocol import ENGINE_PROTOCOL_VERSION, MIN_ENGINE_PROTOCOL_VERSION, check_engine_protocol_version

__all__ = ["ENGINE_PROTOCOL_VERSION", "MIN_ENGINE_PROTOCOL_VERSION", "check_engine_protocol_version"]
