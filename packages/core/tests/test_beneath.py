"""core.beneath: paths stay beneath their root, symlinks are never followed, reads are bounded.

Every test runs twice: through openat2 where this kernel has it, and through the component-by-component
fallback (forced by making openat2 answer ENOSYS, as an old kernel or a seccomp filter would).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Generator
from pathlib import Path

import pytest

from tolokaforge.core import beneath
from tolokaforge.core.beneath import (
    NotARegularFile,
    PathEscapes,
    PathHasSymlink,
    makedirs_beneath,
    open_beneath,
    read_beneath,
)


@pytest.fixture(params=["openat2", "fallback"])
def mode(request: pytest.FixtureRequest) -> Generator[str]:
    """Each test through openat2 and through the component walk a kernel without it gets."""
    if request.param == "fallback":
        with beneath.walking_only():
            yield "fallback"
    else:
        yield "openat2"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/{a.txt, sub/b.txt, in -> a.txt, out -> ../outside.txt, subout -> outdir}; outdir/b.txt."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("inside a")
    (root / "sub" / "b.txt").write_text("inside b")
    (tmp_path / "outside.txt").write_text("OUTSIDE")
    (tmp_path / "outdir").mkdir()
    (tmp_path / "outdir" / "b.txt").write_text("OUTSIDE")
    (root / "in").symlink_to("a.txt")
    (root / "out").symlink_to(tmp_path / "outside.txt")
    (root / "subout").symlink_to(tmp_path / "outdir", target_is_directory=True)
    return root


def test_reads_regular_files_beneath_the_root(mode: str, tree: Path) -> None:
    assert read_beneath(tree, "a.txt", 1024) == (b"inside a", False)
    assert read_beneath(str(tree), "./sub//b.txt", 1024) == (b"inside b", False)
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert read_beneath(fd, "sub/b.txt", 1024) == (b"inside b", False)
        os.fstat(fd)  # a borrowed descriptor stays open
    finally:
        os.close(fd)


def test_the_caller_chooses_the_open_flags(mode: str, tree: Path) -> None:
    fd = open_beneath(tree, "sub/new.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, b"new")
    finally:
        os.close(fd)
    assert (tree / "sub" / "new.txt").read_bytes() == b"new"
    assert (tree / "sub" / "new.txt").stat().st_mode & 0o777 == 0o600
    listing = open_beneath(tree, "", os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert "a.txt" in os.listdir(listing)
    finally:
        os.close(listing)


@pytest.mark.parametrize("path", ["in", "out", "subout/b.txt"])
def test_a_symlink_anywhere_is_refused_wherever_it_points(mode: str, tree: Path, path: str) -> None:
    with pytest.raises(PathHasSymlink) as raised:
        read_beneath(tree, path, 1024)
    assert raised.value.errno == errno.ELOOP and raised.value.filename == path
    assert isinstance(raised.value, PermissionError)


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "sub/../a.txt", "/etc/passwd"])
def test_dot_dot_and_absolute_paths_are_refused(mode: str, tree: Path, path: str) -> None:
    with pytest.raises(PathEscapes) as raised:
        read_beneath(tree, path, 1024)
    assert raised.value.errno == errno.EXDEV


def test_writing_through_a_symlink_is_refused(mode: str, tree: Path, tmp_path: Path) -> None:
    for path in ("out", "subout/new.txt"):
        with pytest.raises(PathHasSymlink):
            open_beneath(tree, path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    assert (tmp_path / "outside.txt").read_text() == "OUTSIDE"
    assert not (tmp_path / "outdir" / "new.txt").exists()


def test_o_path_does_not_hand_back_the_link_itself(mode: str, tree: Path) -> None:
    with pytest.raises(PathHasSymlink):
        open_beneath(tree, "out", os.O_PATH)
    with pytest.raises(PathHasSymlink):
        open_beneath(tree, "subout", os.O_PATH | os.O_DIRECTORY)


def test_missing_files_and_files_in_the_middle_are_ordinary_errors(mode: str, tree: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_beneath(tree, "nope.txt", 10)
    with pytest.raises(NotADirectoryError):
        read_beneath(tree, "a.txt/x", 10)
    with pytest.raises(IsADirectoryError):
        read_beneath(tree, "sub", 10)
    with pytest.raises(ValueError, match="null byte"):
        read_beneath(tree, "a\0.txt", 10)


def test_a_fifo_is_refused_without_blocking(mode: str, tree: Path) -> None:
    os.mkfifo(tree / "pipe")
    with pytest.raises(NotARegularFile):
        read_beneath(tree, "pipe", 10)


def test_a_sparse_gigabyte_costs_only_the_cap(mode: str, tree: Path) -> None:
    big = tree / "big.bin"
    big.touch()
    os.truncate(big, 1 << 30)
    data, truncated = read_beneath(tree, "big.bin", 4096)
    assert (len(data), truncated) == (4096, True)
    exact, more = read_beneath(tree, "a.txt", len(b"inside a"))
    assert (exact, more) == (b"inside a", False)


def test_makedirs_creates_parents_but_never_through_a_symlink(mode: str, tree: Path, tmp_path: Path) -> None:
    makedirs_beneath(tree, "x/y/z")
    makedirs_beneath(tree, "x/y/z")  # already there: fine
    assert (tree / "x" / "y" / "z").is_dir()
    with pytest.raises(PathHasSymlink):
        makedirs_beneath(tree, "subout/evil")
    assert not (tmp_path / "outdir" / "evil").exists()
    with pytest.raises(PathEscapes):
        makedirs_beneath(tree, "../evil")


def test_the_fallback_is_remembered_after_enosys(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bytes] = []

    def missing(dirfd: int, path: bytes, flags: int, mode: int) -> int:
        calls.append(path)
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

    monkeypatch.setattr(beneath, "_use_openat2", True)
    monkeypatch.setattr(beneath, "_openat2", missing)
    assert read_beneath(tree, "a.txt", 100) == (b"inside a", False)
    assert read_beneath(tree, "sub/b.txt", 100) == (b"inside b", False)
    assert calls == [b"a.txt"]
