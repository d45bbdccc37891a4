"""Open files strictly beneath a directory: no symlink anywhere on the path, no ``..``, no absolute path.

The paths come from untrusted callers (a model's tool call, a pack's file check) and the directory's
contents from untrusted code, which may swap a folder for a symlink at any moment. So a path is never
resolved first and opened afterwards (the two could see different trees): the kernel opens it
relative to the root's descriptor and refuses every symlink on the way, with ``openat2(RESOLVE_BENEATH
| RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`` where the kernel has it (Linux 5.6+), else with one
``openat(O_NOFOLLOW)`` per component. Both refuse the same paths: ``..`` and absolute paths are
refused before either runs, so a grade never depends on the kernel it ran on.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import stat
import sys
from collections.abc import Callable, Generator
from typing import Any

__all__ = [
    "NotARegularFile",
    "PathEscapes",
    "PathHasSymlink",
    "PathRefused",
    "Root",
    "makedirs_beneath",
    "open_beneath",
    "read_beneath",
    "walking_only",
]

Root = int | str | os.PathLike[str]
"""A directory: an open descriptor (borrowed, never closed here) or a path (trusted; may hold symlinks)."""


class PathRefused(PermissionError):
    """The path is refused by policy, whatever the file's permissions say."""


class PathEscapes(PathRefused):
    """The path leaves the root: an absolute path or a ``..`` component."""


class PathHasSymlink(PathRefused):
    """The path is, or passes through, a symbolic link."""


class NotARegularFile(PathRefused):
    """Not a file to read: a FIFO, socket or device (opening one could block or have effects)."""


_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
# The generic syscall table numbers openat2 437; only these two machines are known to use it here.
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "arm64": 437}
_O_TMPFILE: int = getattr(os, "O_TMPFILE", 0)
_O_PATH: int = getattr(os, "O_PATH", 0)
_READ_CHUNK = 1024 * 1024
# A rename anywhere on the system may make openat2 answer EAGAIN; a few retries outlast any burst.
_EAGAIN_RETRIES = 16


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


def _load_syscall() -> Callable[..., Any] | None:
    if sys.platform != "linux" or platform.machine() not in _SYS_OPENAT2:
        return None
    try:
        function: Any = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    # A private CDLL handle: these prototypes cannot leak into anyone else's use of libc.syscall.
    function.restype = ctypes.c_long
    function.argtypes = (
        ctypes.c_long,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.POINTER(_OpenHow),
        ctypes.c_size_t,
    )
    return function


_syscall = _load_syscall()
_use_openat2 = _syscall is not None
"""Cleared at the first ENOSYS (an old kernel, or a seccomp filter that hides the call)."""


@contextlib.contextmanager
def walking_only() -> Generator[None, None, None]:
    """Resolve by the component walk alone for the duration, as on a kernel without openat2 (tests run
    both ways)."""
    global _use_openat2
    saved, _use_openat2 = _use_openat2, False
    try:
        yield
    finally:
        _use_openat2 = saved


def _openat2(dirfd: int, path: bytes, flags: int, mode: int) -> int:
    """A new descriptor, or OSError with the kernel's errno (ENOSYS where there is no openat2)."""
    if _syscall is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    # openat2 refuses a mode unless the call may create; O_TMPFILE holds O_DIRECTORY's bit, so test it whole.
    creates = flags & os.O_CREAT or (_O_TMPFILE and flags & _O_TMPFILE == _O_TMPFILE)
    how = _OpenHow(flags, mode if creates else 0, _RESOLVE)
    number = _SYS_OPENAT2[platform.machine()]
    while True:
        fd = int(_syscall(number, dirfd, path, ctypes.byref(how), ctypes.sizeof(how)))
        if fd >= 0:
            return fd
        code = ctypes.get_errno()
        if code != errno.EINTR:  # os.open retries EINTR itself (PEP 475); a raw syscall must too
            raise OSError(code, os.strerror(code))


def open_beneath(root: Root, relative: str, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
    """Open ``relative`` beneath ``root`` with ``flags`` (``os.O_*``); the caller closes the descriptor.

    Raises :class:`PathEscapes` for ``..`` or an absolute path, :class:`PathHasSymlink` when any
    component is a symlink, ValueError for a NUL byte, else the OSError the kernel answered.
    """
    parts = _components(relative)
    # No O_NOFOLLOW here: under RESOLVE_NO_SYMLINKS it would make a final link answer ENOTDIR (with
    # O_DIRECTORY) or open the link itself (with O_PATH) instead of ELOOP. The fallback adds it.
    flags = (flags | os.O_CLOEXEC) & ~os.O_NOFOLLOW
    with _root_fd(root) as base:
        return _open(base, parts, flags, mode, relative)


def read_beneath(root: Root, relative: str, max_bytes: int) -> tuple[bytes, bool]:
    """At most ``max_bytes`` of the regular file ``relative`` beneath ``root``, and whether it holds more.

    Memory is bounded by ``max_bytes`` whatever the file's size (a sparse 1 GiB file included).
    Besides :func:`open_beneath`'s errors: IsADirectoryError, :class:`NotARegularFile`.
    """
    if max_bytes < 0:
        raise ValueError("max_bytes must not be negative")
    # O_NONBLOCK: opening a FIFO someone planted must not wait for a writer (no effect on files).
    fd = open_beneath(root, relative, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), relative)
        if not stat.S_ISREG(info.st_mode):
            raise NotARegularFile(errno.EPERM, "is not a regular file", relative)
        chunks: list[bytes] = []
        total = 0
        while total < max_bytes:
            data = os.read(fd, min(max_bytes - total, _READ_CHUNK))
            if not data:
                return b"".join(chunks), False
            chunks.append(data)
            total += len(data)
        return b"".join(chunks), bool(os.read(fd, 1))
    finally:
        os.close(fd)


def makedirs_beneath(root: Root, relative: str, mode: int = 0o777) -> None:
    """Create the folder ``relative`` and its missing parents beneath ``root``, never through a symlink."""
    parts = _components(relative)
    with _root_fd(root) as base:
        for depth, name in enumerate(parts):
            parent = open_beneath(base, "/".join(parts[:depth]), _O_PATH | os.O_DIRECTORY)
            try:
                os.mkdir(name, mode, dir_fd=parent)
            except FileExistsError:
                pass  # a symlink of that name is refused when the next step opens it
            finally:
                os.close(parent)
        os.close(open_beneath(base, relative, _O_PATH | os.O_DIRECTORY))


def _components(relative: str) -> list[str]:
    if "\0" in relative:
        raise ValueError("embedded null byte")
    if relative.startswith("/"):
        raise PathEscapes(errno.EXDEV, "is an absolute path", relative)
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise PathEscapes(errno.EXDEV, "goes up with '..'", relative)
    return parts


@contextlib.contextmanager
def _root_fd(root: Root) -> Generator[int, None, None]:
    if isinstance(root, int):
        yield root
        return
    fd = os.open(root, (_O_PATH or os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def _open(base: int, parts: list[str], flags: int, mode: int, relative: str) -> int:
    global _use_openat2
    if _use_openat2:
        path = os.fsencode("/".join(parts) or ".")
        for _ in range(_EAGAIN_RETRIES):
            try:
                return _openat2(base, path, flags, mode)
            except OSError as error:
                if error.errno == errno.ENOSYS:
                    _use_openat2 = False
                    break
                if error.errno != errno.EAGAIN:
                    raise _classified(error.errno or 0, relative) from None
        else:
            raise _classified(errno.EAGAIN, relative)
    return _walk(base, parts, flags, mode, relative)


def _walk(base: int, parts: list[str], flags: int, mode: int, relative: str) -> int:
    """openat2's refusals by hand: each folder opened from the last one's descriptor, never followed."""
    flags |= os.O_NOFOLLOW
    if not parts:
        return _os_open(".", flags, mode, base, relative)
    current = base
    try:
        for name in parts[:-1]:
            opened = _folder(name, current, relative)
            if current != base:
                os.close(current)
            current = opened
        if flags & os.O_DIRECTORY and _O_PATH:
            # O_DIRECTORY | O_NOFOLLOW answers ENOTDIR for a link, as for a file: open the folder
            # first, judge what was opened, then reopen it through its own descriptor.
            folder = _folder(parts[-1], current, relative)
            if flags & _O_PATH:
                return folder
            try:
                return _os_open(".", flags, mode, folder, relative)
            finally:
                os.close(folder)
        fd = _os_open(parts[-1], flags, mode, current, relative)
    finally:
        if current != base:
            os.close(current)
    if flags & _O_PATH:
        # O_PATH | O_NOFOLLOW opens a final link itself rather than refusing it.
        _refuse_kind(fd, relative, folder=False)
    return fd


def _folder(name: str, dir_fd: int, relative: str) -> int:
    """A lookup descriptor (O_PATH: no read permission needed) of the real folder ``name``.

    The object opened is judged, not its name looked up again (which a swap could change meanwhile).
    """
    if not _O_PATH:  # no O_PATH (not Linux): the kernel's ENOTDIR is told apart by a second look
        return _os_open(
            name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, 0, dir_fd, relative
        )
    fd = _os_open(name, _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, 0, dir_fd, relative)
    _refuse_kind(fd, relative, folder=True)
    return fd


def _os_open(name: str, flags: int, mode: int, dir_fd: int, relative: str) -> int:
    try:
        return os.open(name, flags, mode, dir_fd=dir_fd)
    except OSError as error:
        code = error.errno or 0
        if code == errno.ENOTDIR and _is_link(name, dir_fd):
            code = errno.ELOOP
        raise _classified(code, relative) from None


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _refuse_kind(fd: int, relative: str, *, folder: bool) -> None:
    """Close ``fd`` and refuse it when it is a link (or, for ``folder``, anything but a folder)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if stat.S_ISLNK(mode):
        os.close(fd)
        raise _classified(errno.ELOOP, relative)
    if folder and not stat.S_ISDIR(mode):
        os.close(fd)
        raise _classified(errno.ENOTDIR, relative)


def _classified(code: int, relative: str) -> OSError:
    if code == errno.ELOOP:
        return PathHasSymlink(code, "is or passes through a symbolic link", relative)
    if code == errno.EXDEV:
        return PathEscapes(code, "leaves the directory it must stay beneath", relative)
    return OSError(code, os.strerror(code), relative)
