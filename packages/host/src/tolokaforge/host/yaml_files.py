"""The YAML a run's files are written in, and one trial's files as they go to disk.

Apart from the rest of ``results`` because the result-file helper process (file_writer.py) needs
just this: it imports PyYAML and the standard library, nothing of the host's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml

__all__ = ["TrialFiles", "dump_yaml", "read_yaml"]

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
    document written as YAML, or a text written as it is. Picklable: another process may write them."""

    directory: Path
    documents: tuple[tuple[str, dict[str, Any] | str], ...]
    finished: bool

    def store(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        # A grade.yaml left by an earlier attempt goes first: until the new one is in place, the trial
        # is unfinished, so files half rewritten by a crash are never taken for a result.
        (self.directory / "grade.yaml").unlink(missing_ok=True)
        for name, document in self.documents:
            text = document if isinstance(document, str) else dump_yaml(document)
            if name != "grade.yaml":  # read only once grade.yaml says the trial finished: written in place
                (self.directory / name).write_text(text, encoding="utf-8")
                continue
            temporary = self.directory / (name + ".tmp")
            temporary.write_text(text, encoding="utf-8")
            os.replace(temporary, self.directory / name)


def read_yaml(path: Path) -> dict[str, Any]:
    loaded: Any = yaml.load(path.read_text(encoding="utf-8"), Loader=_SafeLoader)
    return loaded if isinstance(loaded, dict) else {}  # pyright: ignore[reportUnknownVariableType]
