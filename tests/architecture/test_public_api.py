"""Every package declares its public API at its root: `__all__` lists names that exist, once each.

Other packages may import only these roots (lint-imports, tests/architecture/test_layers.py), so a name
missing here is a name no other package can use.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOTS = [
    "tolokaforge.contracts",
    "tolokaforge.contracts.runner",
    "tolokaforge.contracts.tool",
    "tolokaforge.contracts.db_api",
    "tolokaforge.core",
    "tolokaforge.db",
    "tolokaforge.runner",
    "tolokaforge.host",
    "pytest_tolokaforge",
    "tolokaforge_provider_fs",
    "tolokaforge_provider_exec",
]


@pytest.mark.parametrize("name", ROOTS)
def test_the_root_declares_what_it_exports(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list), f"{name} has no __all__ list"
    names: list[str] = [str(item) for item in exported]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    assert len(set(names)) == len(names), f"{name}.__all__ names something twice"
    missing = [item for item in names if not hasattr(module, item)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"


@pytest.mark.parametrize(
    ("name", "required"),
    [
        ("tolokaforge.db", {"StateClient", "HttpStateClient", "LocalStateClient", "DBServiceError"}),
        ("tolokaforge.runner", {"start_runner", "RunnerSettings", "RunnerHandle"}),
        ("tolokaforge.host", {"load_pack", "run_pack", "build_trial_spec", "open_runner"}),
    ],
)
def test_the_entry_points_other_packages_use_are_public(name: str, required: set[str]) -> None:
    module = importlib.import_module(name)
    assert required <= set(module.__all__)


ROOT = Path(__file__).resolve().parents[2]
ENTERED_AT_THE_ROOT = ("tolokaforge.db", "tolokaforge.runner", "tolokaforge.host")


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("bench", sorted((ROOT / "tools/bench").glob("*.py")), ids=lambda p: p.name)
def test_benchmarks_use_only_the_public_roots(bench: Path) -> None:
    # lint-imports sees packages, not scripts: the benchmarks' imports are checked here.
    private = [
        module
        for module in _imported_modules(bench)
        if any(module.startswith(root + ".") for root in ENTERED_AT_THE_ROOT)
    ]
    assert private == [], f"{bench.name} imports package internals: {private}"
