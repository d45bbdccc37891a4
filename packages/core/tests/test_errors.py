from __future__ import annotations

import inspect

from tolokaforge.core import errors
from tolokaforge.core.errors import DuplicateToolCallIdError, InvalidToolCallError, TranscriptWireError


def test_every_core_error_is_a_value_error() -> None:
    # The "not gradeable: <ValueError subclass>" row of the GradeTrial error table relies on this.
    classes = [getattr(errors, name) for name in errors.__all__]
    assert classes
    for cls in classes:
        assert inspect.isclass(cls)
        assert issubclass(cls, ValueError), cls


def test_every_error_in_the_module_is_listed_in_its_docstring_tree() -> None:
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        assert name in doc, name


def test_wire_errors_carry_their_path() -> None:
    error = InvalidToolCallError("messages[2].tool_calls[0]", "missing 'id'")
    assert isinstance(error, TranscriptWireError)
    assert error.path == "messages[2].tool_calls[0]"
    assert str(error) == "messages[2].tool_calls[0]: missing 'id'"


def test_duplicate_id_error_names_both_locations() -> None:
    error = DuplicateToolCallIdError("messages[4].tool_calls[0].id", "call_1", "messages[2].tool_calls[0]")
    assert error.call_id == "call_1"
    assert "'call_1'" in str(error)
    assert "messages[2].tool_calls[0]" in str(error)
    assert str(error).startswith("messages[4].tool_calls[0].id: ")
