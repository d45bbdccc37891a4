"""The YAML a run's files are written in, and one trial's files as they go to disk.

Apart from the rest of ``results`` because the result-file helper process (file_writer.py) needs
just this: it imports PyYAML, the standard library and records.py (the signature), nothing else of
the host's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml

from .records import SIGNATURE_FILE, RecordSigner

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
    document written as YAML, or a text written as it is. Picklable: another process may write them."""

    directory: Path
    documents: tuple[tuple[str, dict[str, Any] | str], ...]
    finished: bool
    task_id: str = ""
    trial_index: int = 0

    def store(self, signer: RecordSigner | None = None) -> None:
        """Write the files; with ``signer``, a finished trial's ``signature.yaml`` goes just before its
        grade.yaml (records.py), over the very bytes written."""
        self.directory.mkdir(parents=True, exist_ok=True)
        # A grade.yaml left by an earlier attempt goes first: until the new one is in place, the trial
        # is unfinished, so files half rewritten by a crash are never taken for a result.
        (self.directory / "grade.yaml").unlink(missing_ok=True)
        (self.directory / SIGNATURE_FILE).unlink(missing_ok=True)
        contents: dict[str, bytes] = {}
        for name, document in self.documents:
            data = (document if isinstance(document, str) else dump_yaml(document)).encode("utf-8")
            contents[name] = data
            if name != "grade.yaml":  # read only once grade.yaml says the trial finished: written in place
                _write_new(self.directory / name, data)
                continue
            if signer is not None:
                signature = signer.trial_signature(self.task_id, self.trial_index, contents)
                _write_new(self.directory / SIGNATURE_FILE, dump_yaml(signature).encode("utf-8"))
            temporary = self.directory / (name + ".tmp")
            _write_new(temporary, data)
            os.replace(temporary, self.directory / name)


def _write_new(path: Path, data: bytes) -> None:
    """Write ``path`` as a new file: whatever was there (a symlink planted to redirect the write
    elsewhere, say) is removed first, never written through."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def parse_yaml(data: bytes | str) -> dict[str, Any]:
    """A document from its text (a mapping; anything else reads as empty)."""
    loaded: Any = yaml.load(data, Loader=_SafeLoader)
    return loaded if isinstance(loaded, dict) else {}  # pyright: ignore[reportUnknownVariableType]


def read_yaml(path: Path) -> dict[str, Any]:
    loaded: Any = yaml.load(path.read_text(encoding="utf-8"), Loader=_SafeLoader)
    return loaded if isinstance(loaded, dict) else {}  # pyright: ignore[reportUnknownVariableType]
