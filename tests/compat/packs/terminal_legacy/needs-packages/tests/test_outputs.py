"""needs-packages: only checks that pretty.json exists (this task is skipped here: its image installs jq)."""

from pathlib import Path


def test_pretty_exists() -> None:
    assert Path("/app/pretty.json").is_file()
