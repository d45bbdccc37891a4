"""Checks for fix-mean-script: mean.py must be right on the given file and on inputs it has never seen."""

import subprocess
import sys
from pathlib import Path

APP = Path("/app")


def _run(numbers: str, tmp_path: Path) -> str:
    data = tmp_path / "input.txt"
    data.write_text(numbers, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(APP / "mean.py"), str(data)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_given_file() -> None:
    done = subprocess.run(
        [sys.executable, "mean.py", "numbers.txt"], cwd=APP, capture_output=True, text=True, timeout=30
    )
    assert done.stdout.strip() == "18.00"


def test_unseen_input(tmp_path: Path) -> None:
    assert _run("1\n2\n", tmp_path) == "1.50"


def test_single_value(tmp_path: Path) -> None:
    assert _run("\n7.25\n\n", tmp_path) == "7.25"
