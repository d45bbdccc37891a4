"""The package root re-exports every public name of the modules it fronts."""

from __future__ import annotations

from types import ModuleType

import pytest

import tolokaforge.core
from tolokaforge.core import errors, protocol, termination, transcript
from tolokaforge.core.transcript import messages, recorded, timeline, wire


@pytest.mark.parametrize("module", [errors, protocol, termination, transcript])
def test_root_reexports_the_module(module: ModuleType) -> None:
    names: list[str] = module.__all__
    missing = set(names) - set(tolokaforge.core.__all__)
    assert not missing, f"{module} exports {sorted(missing)} but tolokaforge.core does not"
    for name in names:
        assert getattr(tolokaforge.core, name) is getattr(module, name)


@pytest.mark.parametrize("module", [messages, recorded, timeline, wire])
def test_transcript_facade_reexports_its_modules(module: ModuleType) -> None:
    names: list[str] = module.__all__
    assert set(names) <= set(transcript.__all__)
