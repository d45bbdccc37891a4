"""Import a task's tool code in isolation: one synthetic package per distinct code bundle.

Two packs may both have a module named ``tools``. Importing them by plain name would make the second
trial silently run the first pack's code, so each bundle is imported under its own package name,
``_tolokaforge_code_<digest>``, whose ``__path__`` is the bundle's root. The digest covers every
Python file's path and bytes: trials of one pack share the imported modules; different code never
does. Pack code imports its own modules relatively (``from .helpers import x``).

Code arrives as a directory the runner can read (``ToolCode.path``) or as files inside the TrialSpec
(``ToolCode.files``, for a remote runner); files are written under the runner's work directory
first, refusing any path that would leave it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import sys
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import ModuleType

from tolokaforge.core.models import ToolCode
from tolokaforge.core.pack_imports import imported_in_isolation

from ..errors import ToolLoadError

__all__ = ["CodeBundle", "load_code"]

_PREFIX = "_tolokaforge_code_"
_lock = threading.Lock()
_materialised: dict[Path, Path] = {}
"""Bundle directories this process wrote in full, to their resolved paths (named by content: written
once, then only read)."""


@dataclass(frozen=True)
class CodeBundle:
    """A task's code, importable under ``package``."""

    root: Path
    digest: str
    package: str

    def import_module(self, module_path: str) -> ModuleType:
        """Import ``module_path`` (e.g. ``tools`` or ``tools.orders``) from this bundle."""
        try:
            return imported_in_isolation(f"{self.package}.{module_path}", self.root, self.package)
        except ModuleNotFoundError as error:
            raise ToolLoadError(
                f"module {module_path!r} not found in the task's code at {self.root}: {error}"
            ) from error
        except Exception as error:  # pack code raising at import time is the pack's defect, reported as such
            raise ToolLoadError(
                f"importing {module_path!r} from {self.root} raised {type(error).__name__}: {error}"
            ) from error


def load_code(code: ToolCode, work_dir: Path) -> CodeBundle:
    """Make ``code`` importable and return its bundle (idempotent for identical code)."""
    if code.path is not None:
        root = Path(code.path).resolve()
        if not root.is_dir():
            raise ToolLoadError(f"tool_code.path {code.path!r} is not a directory this runner can read")
        digest = _digest_dir(root)
    else:
        assert code.files is not None
        digest = _digest_files(code.files)
        with _lock:  # another registration may be importing from this very bundle
            target = work_dir / f"code-{digest[:24]}"
            # Every trial of a task brings the same files: write (and check) them once, not per trial.
            root = _materialised.get(target)
            if root is None or not root.is_dir():
                root = _materialised[target] = _materialise(code.files, target)
    package = f"{_PREFIX}{hashlib.sha256(f'{root}|{digest}'.encode()).hexdigest()[:24]}"
    with _lock:
        if package not in sys.modules:
            spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
            module = importlib.util.module_from_spec(spec)
            module.__path__ = [str(root)]
            sys.modules[package] = module
    return CodeBundle(root=root, digest=digest, package=package)


def _digest_dir(root: Path) -> str:
    hasher = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        hasher.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return hasher.hexdigest()


def _digest_files(files: dict[str, str]) -> str:
    hasher = hashlib.sha256()
    for name in sorted(files):
        hasher.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return hasher.hexdigest()


def _materialise(files: dict[str, str], root: Path) -> Path:
    for name, text in files.items():
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts or not relative.parts or "\\" in name:
            raise ToolLoadError(f"tool_code.files: path {name!r} must be relative and stay inside the bundle")
        target = root.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            # The directory is named by the content digest: an existing file already holds this text.
            partial = target.with_suffix(target.suffix + ".partial")
            partial.write_text(text)
            partial.replace(target)
    return root.resolve()
