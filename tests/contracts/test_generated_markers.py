"""Every generated file says so on its first lines, so nobody edits one by hand.

The marker is written by the generator pipeline (tools/codegen), never added by hand: this test
fails when a new generated file arrives without one, and `tools/codegen --check` fails when a marker
was added anywhere but in the pipeline.
"""

from __future__ import annotations

from pathlib import Path

GENERATED = Path(__file__).resolve().parents[2] / "packages/contracts/src/tolokaforge/contracts/_gen"


def test_every_generated_file_carries_do_not_edit() -> None:
    # py.typed is a PEP 561 marker whose content type checkers read; it holds no code to edit.
    # __pycache__ holds the interpreter's bytecode, not generated sources.
    files = sorted(
        path
        for path in GENERATED.rglob("*")
        if path.is_file() and path.name != "py.typed" and "__pycache__" not in path.parts
    )
    assert files, f"no generated files under {GENERATED}"
    unmarked = [
        str(path.relative_to(GENERATED))
        for path in files
        if "DO NOT EDIT" not in "".join(path.read_text(encoding="utf-8").splitlines(keepends=True)[:5])
    ]
    assert unmarked == [], f"generated files without a DO NOT EDIT line in their first 5 lines: {unmarked}"
