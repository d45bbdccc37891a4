"""greeting-file: hello.txt exists in the working directory and greets the name from name.txt."""

from pathlib import Path

WORK = Path("/srv/greeting")


def test_hello_exists() -> None:
    assert (WORK / "hello.txt").is_file()


def test_hello_greets_the_name() -> None:
    name = (WORK / "name.txt").read_text(encoding="utf-8").strip()
    assert (WORK / "hello.txt").read_text(encoding="utf-8").strip() == f"Hello, {name}!"
