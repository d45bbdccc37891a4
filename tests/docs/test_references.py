"""Every reference in the repository's prose resolves to a file (and heading) in the repository.

Three kinds of reference are checked, in Markdown files and in the comments and docstrings of Python,
proto and shell files:

* Markdown links ``[text](target)`` whose target is relative: the file or folder must exist, and a
  ``#anchor`` into a Markdown file must name one of its headings (GitHub's heading slugs).
* Cited repository paths such as ``docs/grading.md#step-10-the-fold`` or ``packages/runner/README.md``: a path
  that starts with one of the repository's top-level folders must exist, relative to the repository
  root, to the citing file's folder, to the citing file's package (the nearest folder holding a
  ``pyproject.toml``, so a package README may cite ``tests/test_<module>.py``), or to one of that
  package's import packages under ``src/`` (so a package README may name a module by its path there).
* Any other Markdown file name, bare (``README.md``) or with folders (``../grading.md``): must exist
  next to the citing file, in its package, at the root, or in ``docs/`` or ``docs/protocol/``.

A reference whose text is a pattern rather than a path (it holds ``*``, ``<``, ``{`` or ``$``) is not
checked.

Docs that other work is writing now are listed in EXPECTED_SOON: references to them count as resolved
until they exist, and a test fails once one exists, so that the list only ever shrinks.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
EXPECTED_SOON: frozenset[str] = frozenset()

TOP_LEVEL = ("docs", "packages", "plugins", "contracts", "tools", "examples", "tests")
_SKIPPED_DIRS = {"node_modules", "__pycache__", "_gen", "runs"}
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
_PATH = re.compile(
    r"(?<![A-Za-z0-9_./-])(?:" + "|".join(TOP_LEVEL) + r")/[A-Za-z0-9_./#<>{}*$-]*[A-Za-z0-9_/>}*-]"
)
_MD_NAME = re.compile(
    r"(?<![A-Za-z0-9_./-])((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-]+\.md)(?:#([A-Za-z0-9_-]+))?(?![A-Za-z0-9_/-])"
)
_PATTERN_CHARS = set("*<{$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Reference:
    """One reference found in ``source`` (repository-relative) at ``line``."""

    source: str
    line: int
    text: str
    problem: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.text!r} {self.problem}"


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of ``markdown`` (duplicates numbered ``-1``, ``-2``)."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    in_fence = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if in_fence or match is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def broken_references(root: Path, expected_soon: Iterable[str] = ()) -> list[Reference]:
    """Every reference under ``root`` that does not resolve; paths in ``expected_soon`` count as present."""
    checker = _Checker(root.resolve(), frozenset(expected_soon))
    found: list[Reference] = []
    for path in _files(checker.root):
        found.extend(checker.check_file(path))
    return found


def _files(root: Path) -> Iterator[Path]:
    for folder, subfolders, names in os.walk(root):
        # Pruned in place, so os.walk never descends into .git, .venv, generated code or run outputs.
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d not in _SKIPPED_DIRS)
        here = Path(folder)
        scripts_here = here.relative_to(root).as_posix() in ("tools", "tools/dev")
        for name in sorted(names):
            path = here / name
            if path.suffix in (".md", ".py", ".proto") or (scripts_here and path.suffix == ""):
                yield path


class _Checker:
    def __init__(self, root: Path, expected_soon: frozenset[str]) -> None:
        self.root = root
        self.expected_soon = expected_soon
        self._anchors: dict[Path, set[str]] = {}

    def check_file(self, path: Path) -> list[Reference]:
        text = path.read_text(encoding="utf-8", errors="replace")
        problems: list[Reference] = []
        for line, prose in _prose(path, text):
            if path.suffix == ".md":
                for target in _LINK.findall(prose):
                    problem = self._link(path, target)
                    if problem:
                        problems.append(Reference(self._rel(path), line, target, problem))
                # A link's text and target are checked as a link, not again as citations.
                prose = _LINK.sub(" ", prose)
            for match in _PATH.finditer(prose):
                problem = self._cited(path, match.group(0).rstrip("."))
                if problem:
                    problems.append(Reference(self._rel(path), line, match.group(0), problem))
            for match in _MD_NAME.finditer(prose):
                if match.group(1).split("/")[0] in TOP_LEVEL:
                    continue  # a cited repository path, checked above
                problem = self._bare(path, match.group(1), match.group(2))
                if problem:
                    problems.append(Reference(self._rel(path), line, match.group(0), problem))
        return problems

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _link(self, source: Path, target: str) -> str | None:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            return None
        file_part, _, anchor = target.partition("#")
        if not file_part:
            return self._anchor(source, anchor)
        if _PATTERN_CHARS & set(file_part):
            return None
        resolved = (source.parent / file_part).resolve()
        return self._exists(resolved, anchor)

    def _cited(self, source: Path, cited: str) -> str | None:
        if _PATTERN_CHARS & set(cited):
            return None
        file_part, _, anchor = cited.partition("#")
        package = _package_root(source, self.root)
        bases = [self.root, source.parent, package, *_import_roots(package)]
        for base in bases:
            candidate = (base / file_part).resolve()
            if candidate.exists() or self._is_expected(candidate):
                return self._exists(candidate, anchor)
        return "does not exist in the repository"

    def _bare(self, source: Path, name: str, anchor: str | None) -> str | None:
        bases = [source.parent, _package_root(source, self.root), self.root]
        bases += [self.root / "docs", self.root / "docs" / "protocol"]
        for base in bases:
            candidate = (base / name).resolve()
            if candidate.exists() or self._is_expected(candidate):
                return self._exists(candidate, anchor or "")
        return "names no Markdown file in the repository (next to it, in its package, at the root, in docs/)"

    def _is_expected(self, path: Path) -> bool:
        try:
            return path.relative_to(self.root).as_posix() in self.expected_soon
        except ValueError:
            return False

    def _exists(self, path: Path, anchor: str) -> str | None:
        if not path.is_relative_to(self.root):
            return "points outside the repository"
        if not path.exists():
            return None if self._is_expected(path) else "does not exist in the repository"
        if anchor and path.suffix == ".md":
            return self._anchor(path, anchor)
        return None

    def _anchor(self, markdown: Path, anchor: str) -> str | None:
        anchors = self._anchors.get(markdown)
        if anchors is None:
            anchors = heading_anchors(markdown.read_text(encoding="utf-8"))
            self._anchors[markdown] = anchors
        if anchor.lower() in anchors:
            return None
        return f"names no heading of {markdown.relative_to(self.root).as_posix()} (anchor #{anchor})"


def _package_root(source: Path, root: Path) -> Path:
    for folder in source.parents:
        if folder == root or not folder.is_relative_to(root):
            break
        if (folder / "pyproject.toml").is_file():
            return folder
    return root


def _import_roots(package: Path) -> list[Path]:
    """The outermost folders with an ``__init__.py`` under ``package/src`` (namespace folders skipped)."""
    src = package / "src"
    if not src.is_dir():
        return []
    return sorted(
        init.parent
        for init in src.rglob("__init__.py")
        if not (init.parent.parent / "__init__.py").is_file() and "_gen" not in init.parts
    )


def _prose(path: Path, text: str) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of what a reader reads as prose: all of a Markdown file, comments and
    docstrings of Python, comments of proto and shell files."""
    if path.suffix == ".md":
        yield from enumerate(text.splitlines(), start=1)
    elif path.suffix == ".py":
        yield from _python_prose(text)
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            marker = "//" if path.suffix == ".proto" else "#"
            if marker in line:
                yield number, line[line.index(marker) :]


def _python_prose(text: str) -> Iterator[tuple[int, str]]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                for offset, line in enumerate(first.value.value.splitlines()):
                    yield first.lineno + offset, line
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def test_every_reference_resolves() -> None:
    broken = broken_references(REPOSITORY, EXPECTED_SOON)
    assert not broken, "references that do not resolve:\n" + "\n".join(str(reference) for reference in broken)


def test_expected_soon_docs_are_still_missing() -> None:
    arrived = sorted(path for path in EXPECTED_SOON if (REPOSITORY / path).exists())
    assert not arrived, f"these docs exist now: remove them from EXPECTED_SOON in {__file__}: {arrived}"


def test_broken_references_are_reported(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "protocol").mkdir(parents=True)
    (docs / "guide.md").write_text("# Guide\n\n## The fold\n\nSee [the fold](#the-fold).\n", encoding="utf-8")
    (docs / "protocol" / "runner.md").write_text(
        "# Runner\n\n"
        "[ok](../guide.md#the-fold) [gone](../missing.md) [bad anchor](../guide.md#no-such-heading)\n"
        "`docs/guide.md` and `docs/nothing.md`, a pattern `docs/<name>.md`, soon `docs/soon.md`.\n"
        "The old spec: runner-protocol.md, shared/spec/tool-provider-conformance.md. The guide: guide.md.\n",
        encoding="utf-8",
    )
    package = tmp_path / "packages" / "core"
    (package / "tests").mkdir(parents=True)
    (package / "pyproject.toml").write_text("", encoding="utf-8")
    (package / "tests" / "test_a.py").write_text("", encoding="utf-8")
    (package / "src" / "ns" / "core" / "tools").mkdir(parents=True)
    (package / "src" / "ns" / "core" / "__init__.py").write_text("", encoding="utf-8")
    (package / "src" / "ns" / "core" / "tools" / "base.py").write_text("", encoding="utf-8")
    (package / "README.md").write_text(
        "Tests: `tests/test_a.py`, `tests/test_b.py`. Modules: `tools/base.py`, `tools/gone.py`.\n",
        encoding="utf-8",
    )
    (package / "module.py").write_text(
        '"""Follows docs/guide.md#the-fold and design.md."""\n'
        "# see docs/protocol/runner.md#runner, not docs/protocol/db.md\n"
        'PATH = "docs/not-a-comment.md"\n',
        encoding="utf-8",
    )

    found = {(r.source, r.text) for r in broken_references(tmp_path, {"docs/soon.md"})}

    assert found == {
        ("docs/protocol/runner.md", "../missing.md"),
        ("docs/protocol/runner.md", "../guide.md#no-such-heading"),
        ("docs/protocol/runner.md", "docs/nothing.md"),
        ("docs/protocol/runner.md", "runner-protocol.md"),
        ("docs/protocol/runner.md", "shared/spec/tool-provider-conformance.md"),
        ("packages/core/README.md", "tests/test_b.py"),
        ("packages/core/README.md", "tools/gone.py"),
        ("packages/core/module.py", "design.md"),
        ("packages/core/module.py", "docs/protocol/db.md"),
    }
