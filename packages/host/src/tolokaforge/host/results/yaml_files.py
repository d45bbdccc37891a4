"""The YAML a run's files are written in, and one trial's files as they go to disk.

Apart from the rest of ``results`` because the result-file helper process (file_writer.py) needs
just this: it imports PyYAML, the standard library and records.py (the signature), nothing else of
the host's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml

__all__ = ["TrialFiles", "dump_yaml", "parse_yaml", "read_yaml"]

# libyaml's C emitter and parser (bundled with PyYAML's wheels) are ~10x faster than the pure-Python
# ones; result files are written (and, on resume, read) once per trial, so they are on the hot path.
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Dumper(_SafeDumper):
    """Multi-line strings (prompts, tool outputs) as literal blocks, so the files read like the text."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = (
        "|" if "\n" in value and not any(c in value for c in "\r\t") and value == value.rstrip(" ") else None
    )
    represent = cast(Any, dumper).represent_scalar  # PyYAML's stubs leave the value untyped
    return cast(yaml.Node, represent("tag:yaml.org,2002:str", value, style=style))


_Dumper.add_representer(str, _represent_str)


def dump_yaml(data: dict[str, Any] | list[Any]) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


@dataclass(frozen=True)
class TrialFiles:
    """One trial's files, in the order they are written (grade.yaml, when there is one, last): each a
    document written as YAML, a text written as it is, or bytes (an attachment, ``attachments/<name>``)
    written as they are. Picklable: another process may write them."""

    directory: Path
    documents: tuple[tuple[str, dict[str, Any] | str | bytes], ...]
    finished: bool
    task_id: str = ""
    trial_index: int = 0


def parse_yaml(data: bytes | str) -> dict[str, Any]:
    """A document from its text (a mapping; anything else reads as empty)."""
    loaded: Any = yaml.load(data, Loader=_SafeLoader)
    return loaded if isinstance(loaded, dict) else {}  # pyright: ignore[reportUnknownVariableType]


def read_yaml(path: Path) -> dict[str, Any]:
    loaded: Any = yaml.load(path.read_text(encoding="utf-8"), Loader=_SafeLoader)
    return loaded if isinstance(loaded, dict) else {}  # pyright: ignore[reportUnknownVariableType]
