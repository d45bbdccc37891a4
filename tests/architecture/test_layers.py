"""The layer rule is a contract CI checks: `lint-imports` passes on the tree and fails, naming the import,
on a copy of the tree that breaks it (docs/architecture.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
SOURCE_DIRS = sorted([*ROOT.glob("packages/*/src"), *ROOT.glob("plugins/*/src")])


def _copy_tree(tmp_path: Path) -> tuple[Path, list[Path]]:
    """The importable sources and the linter's configuration, copied; returns (config, source roots)."""
    roots: list[Path] = []
    for source in SOURCE_DIRS:
        target = tmp_path / source.relative_to(ROOT)
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        roots.append(target)
    config = tmp_path / "pyproject.toml"
    shutil.copy(ROOT / "pyproject.toml", config)
    return config, roots


def _lint(config: Path, roots: list[Path]) -> subprocess.CompletedProcess[str]:
    # The copies go first on the path, so the linter analyses them, not the installed (editable) tree.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(root) for root in roots)}
    return subprocess.run(
        [str(LINT_IMPORTS), str(config), "--no-cache"],
        capture_output=True,
        text=True,
        env=env,
        cwd=config.parent,
        timeout=120,
    )


def _append_import(roots: list[Path], module: str, statement: str) -> None:
    relative = Path(*module.split(".")).with_suffix(".py")
    path = next(root / relative for root in roots if (root / relative).exists())
    path.write_text(path.read_text() + f"\n{statement}\n")


def test_the_tree_keeps_every_contract() -> None:
    result = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_copied_tree_is_what_the_linter_reads(tmp_path: Path) -> None:
    config, roots = _copy_tree(tmp_path)
    result = _lint(config, roots)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "statement", "named"),
    [
        # the runner reaching into a db module instead of the db package's root
        (
            "tolokaforge.runner.lifecycle.registry",
            "import tolokaforge.db.memory",
            "tolokaforge.runner.lifecycle.registry -> tolokaforge.db.memory",
        ),
        # an upward import: core knowing about the runner
        (
            "tolokaforge.core.protocol",
            "import tolokaforge.runner",
            "tolokaforge.core.protocol -> tolokaforge.runner",
        ),
        # the plugin entering the host through a module
        (
            "pytest_tolokaforge.session",
            "import tolokaforge.host.run.episode",
            "pytest_tolokaforge.session -> tolokaforge.host.run.episode",
        ),
        # an import cycle between two modules of one package
        (
            "pytest_tolokaforge.session",
            "import pytest_tolokaforge.plugin",
            ".session -> .plugin",
        ),
        # generated code used past its facade
        (
            "tolokaforge.runner.edge.servicer",
            "import tolokaforge.contracts._gen.db_service",
            "tolokaforge.runner.edge.servicer -> tolokaforge.contracts._gen.db_service",
        ),
    ],
)
def test_a_violation_fails_naming_the_import(tmp_path: Path, module: str, statement: str, named: str) -> None:
    config, roots = _copy_tree(tmp_path)
    _append_import(roots, module, statement)
    result = _lint(config, roots)
    assert result.returncode != 0
    # The report wraps long lines; compare with whitespace folded.
    assert named in " ".join(result.stdout.split()), result.stdout
