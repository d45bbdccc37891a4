"""Every package README lists the package's modules, and lists none that no longer exist.

A package is a folder under ``packages/`` or ``plugins/`` with a ``src/`` tree; its *module root* is the
folder its build names in ``[tool.uv.build-backend] module-name`` (``tolokaforge.runner`` is
``src/tolokaforge/runner``; the SDK's ``tolokaforge`` is ``src/tolokaforge``), else ``src/``. Its modules
are the ``.py`` files under ``src/``, named relative to the module root (``edge/servicer.py``), except
generated code (``_gen/``) and ``__init__.py`` files that only import and re-export: an ``__init__.py``
that defines something of its own (a function, a class, a public value, a call at import time) is a
module too.

The README's ``## Modules`` section lists each module in the first cell of a table row, in backticks, by
that relative path (a cell may list several); backticked names elsewhere, such as a pack's
``checks.py`` in a description, are prose. In the runner and the host, whose code is grouped in
subpackages, every module at the module root (other than ``__init__.py``) is also listed under
``### At the top level``, which says why it is not in a subpackage.
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
GROUPED_PACKAGES = frozenset({"runner", "host"})

_SKIPPED_DIRS = {"_gen", "__pycache__"}
_MENTION = re.compile(r"`([A-Za-z0-9_./-]+\.py)`")
# A lazy ``__getattr__``/``__dir__`` pair and dunder values such as ``__version__`` are re-export machinery.
_REEXPORT_FUNCTIONS = {"__getattr__", "__dir__"}


@dataclass(frozen=True)
class Mismatch:
    """What one package README gets wrong about its package's modules."""

    missing: tuple[str, ...]
    stale: tuple[str, ...]
    unreasoned: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.missing or self.stale or self.unreasoned)

    def __str__(self) -> str:
        lines: list[str] = []
        if self.missing:
            lines.append("modules the README does not mention: " + ", ".join(self.missing))
        if self.stale:
            lines.append("modules the README mentions that do not exist: " + ", ".join(self.stale))
        if self.unreasoned:
            lines.append(
                "top-level modules with no reason under '### At the top level': " + ", ".join(self.unreasoned)
            )
        return "\n".join(lines)


def package_dirs(repository: Path) -> list[Path]:
    """Every workspace package with a ``src/`` tree, in ``packages/`` and ``plugins/``."""
    found: list[Path] = []
    for group in ("packages", "plugins"):
        folder = repository / group
        if folder.is_dir():
            found.extend(sorted(p for p in folder.iterdir() if (p / "src").is_dir()))
    return found


def module_root(package: Path) -> Path:
    """``src/<module-name>`` when the build names a module that holds every ``.py`` file, else ``src/``."""
    src = package / "src"
    pyproject = package / "pyproject.toml"
    if pyproject.is_file():
        build = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("uv", {})
        name = build.get("build-backend", {}).get("module-name")
        if isinstance(name, str):
            root = src.joinpath(*name.split("."))
            if root.is_dir() and all(path.is_relative_to(root) for path in _python_files(src)):
                return root
    return src


def _python_files(src: Path) -> list[Path]:
    return [p for p in src.rglob("*.py") if not _SKIPPED_DIRS & set(p.relative_to(src).parts)]


def holds_code(init_file: Path) -> bool:
    """Whether an ``__init__.py`` defines something beyond imports, ``__all__`` and lazy re-exports."""
    tree = ast.parse(init_file.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring, or a string standing as a comment
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.FunctionDef) and node.name in _REEXPORT_FUNCTIONS:
            continue
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if len(names) == len(targets) and all(n.startswith("_") for n in names):
                continue
        return True
    return False


def modules(package: Path) -> tuple[set[str], set[str]]:
    """``(modules a README must list, every .py file it may name)``, relative to the module root."""
    src = package / "src"
    root = module_root(package)
    required: set[str] = set()
    present: set[str] = set()
    for path in _python_files(src):
        name = path.relative_to(root).as_posix()
        present.add(name)
        if path.name != "__init__.py" or holds_code(path):
            required.add(name)
    return required, present


def _section(markdown: str, heading: str, level: int) -> str:
    """The text under ``heading`` up to the next heading of the same or a higher level."""
    marks = "#" * level
    match = re.search(rf"^{marks} {re.escape(heading)}\s*$", markdown, flags=re.MULTILINE)
    if match is None:
        return ""
    rest = markdown[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, flags=re.MULTILINE)
    return rest if end is None else rest[: end.start()]


def listed(section: str) -> set[str]:
    """The backticked ``.py`` paths in the first cell of each table row of ``section``."""
    found: set[str] = set()
    for line in section.splitlines():
        cells = line.strip().split("|")
        if len(cells) >= 3 and not cells[0]:
            found.update(_MENTION.findall(cells[1]))
    return found


def check_readme(package: Path) -> Mismatch:
    """Compare ``package``'s README with its modules."""
    readme = package / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    listing = _section(text, "Modules", 2)
    mentioned = listed(listing)
    required, present = modules(package)
    unreasoned: set[str] = set()
    if package.name in GROUPED_PACKAGES:
        reasons = listed(_section(listing, "At the top level", 3))
        unreasoned = {m for m in required if "/" not in m and m != "__init__.py"} - reasons
    return Mismatch(
        missing=tuple(sorted(required - mentioned)),
        stale=tuple(sorted(mentioned - present)),
        unreasoned=tuple(sorted(unreasoned)),
    )


@pytest.mark.parametrize(
    "package", package_dirs(REPOSITORY), ids=lambda p: p.relative_to(REPOSITORY).as_posix()
)
def test_readme_lists_every_module(package: Path) -> None:
    mismatch = check_readme(package)
    assert not mismatch, (
        f"{package.relative_to(REPOSITORY).as_posix()}/README.md, section '## Modules':\n{mismatch}"
    )


def test_every_package_is_checked() -> None:
    names = {p.relative_to(REPOSITORY).as_posix() for p in package_dirs(REPOSITORY)}
    assert {"packages/core", "packages/runner", "packages/host", "plugins/pytest-tolokaforge"} <= names
    assert all(modules(REPOSITORY / name)[0] for name in names), "a package whose src/ holds no module"


def test_mismatches_are_reported(tmp_path: Path) -> None:
    package = tmp_path / "runner"
    root = package / "src" / "ns" / "runner"
    for relative, text in {
        "__init__.py": '"""Root."""\nfrom .errors import E\n\n__all__ = ["E"]\n',
        "errors.py": "",
        "helpers.py": "",
        "edge/__init__.py": "from .servicer import S\n",
        "edge/servicer.py": "",
        "edge/server.py": "",
        "calls/__init__.py": "def route() -> None: ...\n",
        "_gen/generated.py": "",
    }.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")
    (package / "pyproject.toml").write_text(
        '[tool.uv.build-backend]\nmodule-name = "ns.runner"\n', encoding="utf-8"
    )
    (package / "README.md").write_text(
        "# runner\n\n`helpers.py` above the section does not count.\n\n## Modules\n\n"
        "| module | job |\n|---|---|\n| `edge/servicer.py` | serves |\n| `edge/gone.py` | removed |\n"
        "| `errors.py` | the errors, raised by `helpers.py` |\n\n`calls/__init__.py` in prose is not listed.\n\n"
        "### At the top level\n\n| module | why |\n|---|---|\n| `errors.py` | one tree for every layer |\n\n"
        "## Tests\n\n| `edge/server.py` | tested |\n",
        encoding="utf-8",
    )

    mismatch = check_readme(package)

    assert mismatch.missing == ("calls/__init__.py", "edge/server.py", "helpers.py")
    assert mismatch.stale == ("edge/gone.py",)
    assert mismatch.unreasoned == ("helpers.py",)


def test_a_namespace_module_root_names_modules_from_it(tmp_path: Path) -> None:
    package = tmp_path / "sdk"
    for relative in ("ns/sdk/__init__.py", "ns/sdk/tools.py", "ns/core/shim.py"):
        (package / "src" / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / "src" / relative).write_text("", encoding="utf-8")
    (package / "pyproject.toml").write_text(
        '[tool.uv.build-backend]\nmodule-name = "ns"\nnamespace = true\n', encoding="utf-8"
    )
    (package / "README.md").write_text(
        "## Modules\n\n| `sdk/tools.py`, `tools.py` | tools |\n", encoding="utf-8"
    )

    mismatch = check_readme(package)

    assert mismatch.missing == ("core/shim.py",)
    assert mismatch.stale == ("tools.py",)


def test_without_a_module_name_modules_are_named_from_src(tmp_path: Path) -> None:
    package = tmp_path / "plain"
    (package / "src" / "pkg").mkdir(parents=True)
    (package / "src" / "pkg" / "mod.py").write_text("", encoding="utf-8")
    (package / "README.md").write_text("## Modules\n\n| `mod.py` | a module |\n", encoding="utf-8")

    mismatch = check_readme(package)

    assert mismatch.missing == ("pkg/mod.py",)
    assert mismatch.stale == ("mod.py",)
