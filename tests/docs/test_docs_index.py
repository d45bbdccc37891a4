"""The docs index, ``docs/README.md``, links every page under ``docs/``, so no page is reachable only by
someone who already knows its name."""

from __future__ import annotations

import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
INDEX = "README.md"

_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


def unindexed_pages(docs: Path) -> list[str]:
    """Markdown pages under ``docs`` (relative to it) that the index does not link to."""
    index = docs / INDEX
    linked = {
        (index.parent / target).resolve()
        for target in _LINK.findall(index.read_text(encoding="utf-8"))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)
    }
    return sorted(
        page.relative_to(docs).as_posix()
        for page in docs.rglob("*.md")
        if page != index and page.resolve() not in linked
    )


def test_the_index_links_every_docs_page() -> None:
    missing = unindexed_pages(REPOSITORY / "docs")
    assert not missing, f"docs/{INDEX} does not link these pages: {missing}"


def test_an_unlinked_page_is_reported(tmp_path: Path) -> None:
    (tmp_path / "protocol").mkdir()
    for page in ("guide.md", "faults.md", "protocol/runner.md", "protocol/db.md"):
        (tmp_path / page).write_text("# page\n", encoding="utf-8")
    (tmp_path / INDEX).write_text(
        "[guide](guide.md) [runner](protocol/runner.md#registertrial) [site](https://example.com/faults.md)\n"
        "faults.md named without a link does not count.\n",
        encoding="utf-8",
    )

    assert unindexed_pages(tmp_path) == ["faults.md", "protocol/db.md"]
