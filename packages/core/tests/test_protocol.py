from __future__ import annotations

from tolokaforge.core import (
    ENGINE_PROTOCOL_VERSION,
    MIN_ENGINE_PROTOCOL_VERSION,
    check_engine_protocol_version,
)


def test_engine_and_minimum_are_one_number() -> None:
    # The runner's gate and the host's declaration come from one constant, so one tree always agrees.
    assert MIN_ENGINE_PROTOCOL_VERSION == ENGINE_PROTOCOL_VERSION == 2


def test_current_and_newer_engines_are_accepted() -> None:
    assert check_engine_protocol_version(ENGINE_PROTOCOL_VERSION) is None
    assert check_engine_protocol_version(ENGINE_PROTOCOL_VERSION + 5) is None


def test_older_engine_is_refused_naming_both_versions() -> None:
    reason = check_engine_protocol_version(1)
    assert reason is not None
    assert "engine protocol version 1" in reason
    assert f"minimum {MIN_ENGINE_PROTOCOL_VERSION}" in reason


def test_engine_that_sent_no_version_is_refused() -> None:
    # proto3 decodes an absent engine_protocol_version as 0: a pre-versioning engine.
    assert check_engine_protocol_version(0) is not None
