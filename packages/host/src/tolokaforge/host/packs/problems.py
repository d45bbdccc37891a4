"""Stage one of loading a pack: read its YAML and collect every problem, never stopping at the first.

A :class:`ProblemLog` is shared by every stage of one load. Each problem names the file (shown relative
to the folder holding the pack) and the dotted key it is about, so ``validate`` can print them all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import PackProblem

__all__ = ["KeyFile", "ProblemLog"]

_M = TypeVar("_M", bound=BaseModel)

KeyFile = Callable[[str], tuple[Path, str]]
"""Maps a top-level key to the file it was written in and the key prefix to report it under."""


@dataclass
class ProblemLog:
    root: Path
    problems: list[PackProblem] = field(default_factory=list[PackProblem])

    def add(self, file: Path, key: str, message: str) -> None:
        self.problems.append(PackProblem(self.show(file), key, message))

    def show(self, file: Path) -> Path:
        try:
            return file.relative_to(self.root.parent)
        except ValueError:
            return file

    def mark(self) -> int:
        """A bookmark: ``since(mark)`` tells whether problems were added after it."""
        return len(self.problems)

    def since(self, mark: int) -> bool:
        return len(self.problems) > mark

    def read_yaml(self, file: Path) -> dict[str, Any] | None:
        """The file as a mapping, or None after recording why it is not one."""
        try:
            loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
        except OSError as error:
            self.add(file, "", f"cannot be read: {error.strerror or error}")
            return None
        except yaml.YAMLError as error:
            self.add(file, "", f"is not valid YAML: {' '.join(str(error).split())}")
            return None
        if loaded is None:
            return {}
        if not isinstance(loaded, dict):
            self.add(file, "", f"must be a mapping, got {type(loaded).__name__}")
            return None
        return cast(dict[str, Any], loaded)

    def validate(
        self, model: type[_M], data: Any, file: Path, *, key_file: KeyFile | None = None
    ) -> _M | None:
        """``model`` of ``data``, or None after recording one problem per invalid key."""
        try:
            return model.model_validate(data)
        except ValidationError as error:
            self.add_validation_error(error, file, key_file=key_file)
            return None

    def add_validation_error(
        self, error: ValidationError, file: Path, *, key_file: KeyFile | None = None, prefix: str = ""
    ) -> None:
        for item in error.errors(include_url=False):
            loc = [str(part) for part in item["loc"]]
            where_file, head = key_file(loc[0] if loc else "") if key_file else (file, "")
            parts = [p for p in (head, prefix) if p] + loc
            message = item["msg"]
            if item["type"] == "extra_forbidden":
                message = f"unknown key {loc[-1]!r} (not part of the schema)"
            elif item["type"] in ("literal_error", "enum"):
                message = f"{message}, got {item['input']!r}"
            self.add(where_file, ".".join(parts), message)
