"""Every workspace member declares what its code imports, and imports what it declares.

Run as ``tools/dev/check-deps`` (CI runs it beside lint-imports). Two checks per member of the uv
workspace, over the code under its ``src/``:

* third-party packages: deptry, run in the member's folder so it reads the member's own
  ``[project]`` dependencies and ``[tool.deptry]`` settings;
* workspace packages (``tolokaforge-core``, ``tolokaforge-db``, ...): checked here. Several members
  share the ``tolokaforge`` namespace, and deptry resolves an import by its top-level name only, so
  it cannot tell ``tolokaforge.core`` from ``tolokaforge.db``: to deptry ``tolokaforge`` is first
  party and the workspace packages are left to this script, which resolves each import to the
  member whose ``src/`` holds the module.

A dependency that is needed although no code imports it (something pack code imports at run time,
a module loaded by name) is listed in the member's ``[tool.deptry.per_rule_ignores]`` under DEP002,
with a comment saying why; both checks honour that list.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Member:
    """One workspace member: its folder, distribution name, declared dependencies and modules."""

    root: Path
    name: str
    declared: frozenset[str]
    unused_allowed: frozenset[str]
    per_rule_ignores: dict[str, list[str]]
    modules: set[str] = field(default_factory=lambda: set[str]())


def normalize(name: str) -> str:
    """A distribution name in the form PEP 503 compares (``Foo_Bar`` and ``foo-bar`` are one)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The distribution a PEP 508 requirement string names."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return normalize(match.group(1))


def _table(data: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    current: Any = data
    for key in keys:
        if not isinstance(current, dict) or key not in current:
            return {}
        current = cast(dict[str, Any], current)[key]
    return cast(dict[str, Any], current) if isinstance(current, dict) else {}


def load_members(repo: Path) -> list[Member]:
    """The workspace members named by the root pyproject's ``[tool.uv.workspace]`` globs."""
    root = tomllib.loads((repo / "pyproject.toml").read_text())
    patterns: list[str] = _table(root, "tool", "uv", "workspace").get("members", [])
    folders = sorted({path.parent for pattern in patterns for path in repo.glob(f"{pattern}/pyproject.toml")})
    members: list[Member] = []
    for folder in folders:
        data = tomllib.loads((folder / "pyproject.toml").read_text())
        project = _table(data, "project")
        requirements: list[str] = list(project.get("dependencies", []))
        for extra in _table(project, "optional-dependencies").values():
            requirements += cast(list[str], extra)
        ignores = {
            rule: list(cast(list[str], names))
            for rule, names in _table(data, "tool", "deptry", "per_rule_ignores").items()
        }
        member = Member(
            root=folder,
            name=normalize(project["name"]),
            declared=frozenset(requirement_name(item) for item in requirements),
            unused_allowed=frozenset(normalize(item) for item in ignores.get("DEP002", [])),
            per_rule_ignores=ignores,
        )
        member.modules = set(_modules_under(folder / "src"))
        members.append(member)
    return members


def _modules_under(src: Path) -> Iterator[str]:
    """Dotted names of the modules and regular packages in a ``src/`` folder. A folder without an
    ``__init__.py`` (the ``tolokaforge`` namespace, the SDK's modules inside ``tolokaforge/core/``) is
    no one's: several members put modules in it."""
    for path in src.rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts)


def imported_modules(path: Path) -> Iterator[tuple[str, int]]:
    """Each absolute import in a file, as (module, line); ``from a import b`` yields ``a.b`` too,
    since ``b`` may be a module of another member."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            yield node.module, node.lineno
            for alias in node.names:
                if alias.name != "*":
                    yield f"{node.module}.{alias.name}", node.lineno


def owner_of(module: str, owners: Mapping[str, Member]) -> Member | None:
    """The member whose ``src/`` holds ``module``: the longest owned name it starts with."""
    parts = module.split(".")
    for depth in range(len(parts), 0, -1):
        found = owners.get(".".join(parts[:depth]))
        if found is not None:
            return found
    return None


def _owners(members: Sequence[Member]) -> dict[str, Member]:
    owners: dict[str, Member] = {}
    for member in members:
        for module in member.modules:
            other = owners.setdefault(module, member)
            if other is not member:
                raise SystemExit(f"check-deps: {module} is in both {other.name} and {member.name}")
    return owners


def workspace_findings(member: Member, members: Sequence[Member]) -> list[str]:
    """Workspace packages ``member`` imports without declaring, or declares without importing."""
    owners = _owners(members)
    workspace = {other.name for other in members}
    used: dict[str, str] = {}
    for path in sorted((member.root / "src").rglob("*.py")):
        for module, line in imported_modules(path):
            owner = owner_of(module, owners)
            if owner is not None and owner is not member:
                used.setdefault(owner.name, f"{path.relative_to(REPO)}:{line}")
    findings = [
        f"{where}: imports {name} ({module_hint(name, members)}), which is not among its dependencies"
        for name, where in sorted(used.items())
        if name not in member.declared
    ]
    findings += [
        f"{member.root.relative_to(REPO)}/pyproject.toml: depends on {name} but imports nothing from it"
        for name in sorted((member.declared & workspace) - used.keys() - member.unused_allowed)
    ]
    return findings


def module_hint(name: str, members: Sequence[Member]) -> str:
    """The shortest module a workspace distribution holds beyond a bare namespace, for messages."""
    for member in members:
        if member.name == name:
            candidates = sorted((m for m in member.modules if "." in m or "_" in m), key=len)
            return candidates[0] if candidates else name
    return name


def deptry_command(member: Member, members: Sequence[Member]) -> list[str]:
    """deptry over ``member``'s ``src/``: workspace packages left to :func:`workspace_findings`."""
    first_party = sorted({module.split(".")[0] for other in members for module in other.modules})
    ignores = {rule: list(names) for rule, names in member.per_rule_ignores.items()}
    ignores.setdefault("DEP002", [])
    ignores["DEP002"] += sorted(other.name for other in members if other.name in member.declared)
    # On the command line the mapping replaces the pyproject's, so it carries the member's own too.
    mapping = ",".join(f"{rule}={'|'.join(names)}" for rule, names in sorted(ignores.items()) if names)
    command = [sys.executable, "-m", "deptry", "src", "--no-ansi"]
    for name in first_party:
        command += ["--known-first-party", name]
    if mapping:
        command += ["--per-rule-ignores", mapping]
    return command


def main(argv: Sequence[str] | None = None) -> int:
    """Check every member; print each finding; exit 1 if there is any."""
    parser = argparse.ArgumentParser(
        prog="check-deps", description="Every workspace member declares what it imports (deptry and more)."
    )
    parser.parse_args(argv)
    members = load_members(REPO)
    failed: list[str] = []
    for member in members:
        label = str(member.root.relative_to(REPO))
        print(f"--- {label} ({member.name})", flush=True)
        findings = workspace_findings(member, members)
        for finding in findings:
            print(finding)
        third_party = subprocess.run(deptry_command(member, members), cwd=member.root, check=False)
        if findings or third_party.returncode != 0:
            failed.append(label)
    if failed:
        print(f"\ncheck-deps: undeclared or unused dependencies in {', '.join(failed)}")
        return 1
    print(f"\ncheck-deps: {len(members)} members declare what they import")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
