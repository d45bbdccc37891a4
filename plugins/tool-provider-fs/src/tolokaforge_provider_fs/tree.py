"""Operations on the workspace's tree: list a folder, copy, move and delete files and folders.

Each path's folder is opened beneath the workspace (:mod:`tolokaforge.core.beneath`), and the last
name is then acted on relative to that folder's descriptor, so a folder swapped for a link while the
call runs cannot send it elsewhere. A symlink is never followed, and never acted on: copying,
moving or deleting one is refused like reading through one. A folder copy walks the same way, one
descriptor per folder, and refuses a link it meets.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any

from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.beneath import NotARegularFile, PathHasSymlink, makedirs_beneath, open_beneath

from .paths import Refusal, classify, components, in_workspace, parent_and_name
from .schema import Outcome

__all__ = ["copy_file", "delete_file", "list_dir", "listing", "move_file"]

_O_PATH: int = getattr(os, "O_PATH", 0)
_FOLDER = (_O_PATH or os.O_RDONLY) | os.O_DIRECTORY
_COPY_CHUNK = 1024 * 1024


def listing(root: int, arguments: dict[str, Any]) -> Outcome:
    """``list``: the folder's entries, by name; a link is listed as ``other``, never followed."""
    written = str(arguments.get("path", "."))
    try:
        fd = open_beneath(root, in_workspace(written), os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(fd) as found:
                entries = [
                    {"name": e.name, "type": _entry_type(e)} for e in sorted(found, key=lambda e: e.name)
                ]
        finally:
            os.close(fd)
    except (OSError, ValueError) as error:
        raise classify(written, error) from error
    return Outcome({"path": written, "entries": entries})


def list_dir(root: int, arguments: dict[str, Any]) -> Outcome:
    entries: list[dict[str, str]] = listing(root, arguments).output["entries"]
    by_kind: dict[str, list[str]] = {"dir": [], "file": [], "other": []}
    for entry in entries:
        by_kind[entry["type"]].append(entry["name"])
    output = {
        "path": arguments["path"],
        "dirs": by_kind["dir"],
        "files": by_kind["file"],
        "others": by_kind["other"],
    }
    text = "\n".join(f"{e['type']}: {e['name']}" for e in entries) or "(empty directory)"
    return Outcome(output, text)


def copy_file(root: int, arguments: dict[str, Any]) -> Outcome:
    source, destination = str(arguments["source"]), str(arguments["destination"])
    with _Transfer(root, source, destination) as transfer:
        kind = transfer.source_kind()
        if kind == "dir":
            if transfer.into_folder:
                # A folder is copied to a new name only (the public tool's copytree), never into one.
                raise Refusal(ToolErrorCategory.EXECUTION_FAILED, f"{destination!r} already exists")
            transfer.refuse_into_itself("copy")
            try:
                os.mkdir(transfer.name, 0o777, dir_fd=transfer.to_folder)
            except OSError as error:
                raise classify(destination, error) from error
            _copy_tree(transfer.from_folder, transfer.source_name, transfer.to_folder, transfer.name, source)
        else:
            _copy_one(transfer.from_folder, transfer.source_name, transfer.to_folder, transfer.name, source)
    return Outcome({"source": source, "destination": destination}, f"Copied {source} -> {destination}")


def move_file(root: int, arguments: dict[str, Any]) -> Outcome:
    source, destination = str(arguments["source"]), str(arguments["destination"])
    with _Transfer(root, source, destination) as transfer:
        if transfer.source_kind() == "dir":
            transfer.refuse_into_itself("move")
        if transfer.into_folder and _exists(transfer.to_folder, transfer.name):
            # Into a folder that already holds the name: refused, as the public tool does.
            raise Refusal(
                ToolErrorCategory.EXECUTION_FAILED, f"{destination!r} already holds {transfer.name!r}"
            )
        try:
            os.rename(
                transfer.source_name,
                transfer.name,
                src_dir_fd=transfer.from_folder,
                dst_dir_fd=transfer.to_folder,
            )
        except OSError as error:
            raise classify(destination, error) from error
    return Outcome({"source": source, "destination": destination}, f"Moved {source} -> {destination}")


def delete_file(root: int, arguments: dict[str, Any]) -> Outcome:
    written = str(arguments["path"])
    try:
        folder, name = parent_and_name(in_workspace(written))
        parent = open_beneath(root, folder, _FOLDER)
        try:
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                raise PathHasSymlink(errno.ELOOP, "is a symbolic link", written)
            if stat.S_ISDIR(mode):
                os.rmdir(name, dir_fd=parent)  # an empty folder only, as the public tool
            else:
                os.unlink(name, dir_fd=parent)
        finally:
            os.close(parent)
    except OSError as error:
        if error.errno == errno.ENOTEMPTY:
            raise Refusal(
                ToolErrorCategory.EXECUTION_FAILED, f"{written!r} is a folder that is not empty"
            ) from error
        raise classify(written, error) from error
    except ValueError as error:
        raise classify(written, error) from error
    return Outcome({"path": written}, f"Deleted {written}")


class _Transfer:
    """The two ends of a copy or move, each a folder descriptor and a name in it.

    A destination that is an existing folder receives the source under its own name (as ``cp`` and
    ``mv`` do); otherwise the destination's folders are created and it is the new name.
    """

    def __init__(self, root: int, source: str, destination: str) -> None:
        self.root, self.source, self.destination = root, source, destination
        self.from_folder = self.to_folder = -1
        self.source_name = self.name = ""
        self.into_folder = False
        self.source_parts: list[str] = []
        self.target_parts: list[str] = []

    def __enter__(self) -> _Transfer:
        try:
            self.source_parts = components(in_workspace(self.source))
            folder, self.source_name = parent_and_name(in_workspace(self.source))
            self.from_folder = open_beneath(self.root, folder, _FOLDER)
        except (OSError, ValueError) as error:
            raise classify(self.source, error) from error
        destination = in_workspace(self.destination)
        try:
            self.target_parts = components(destination)
            self.to_folder = self._existing_folder(destination)
            self.into_folder = self.to_folder >= 0
            if self.into_folder:
                self.name = self.source_name
                self.target_parts.append(self.name)
            else:
                folder, self.name = parent_and_name(destination)
                makedirs_beneath(self.root, folder)
                self.to_folder = open_beneath(self.root, folder, _FOLDER)
        except (OSError, ValueError) as error:
            self.__exit__()
            raise classify(self.destination, error) from error
        except Refusal:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        for fd in (self.from_folder, self.to_folder):
            if fd >= 0:
                os.close(fd)
        self.from_folder = self.to_folder = -1

    def _existing_folder(self, destination: str) -> int:
        try:
            return open_beneath(self.root, destination, _FOLDER)
        except (FileNotFoundError, NotADirectoryError):
            return -1

    def source_kind(self) -> str:
        """``dir`` or ``file``; a link or a FIFO, socket or device is refused."""
        try:
            mode = os.stat(self.source_name, dir_fd=self.from_folder, follow_symlinks=False).st_mode
        except OSError as error:
            raise classify(self.source, error) from error
        if stat.S_ISLNK(mode):
            raise classify(self.source, PathHasSymlink(errno.ELOOP, "is a symbolic link", self.source))
        if stat.S_ISDIR(mode):
            return "dir"
        if not stat.S_ISREG(mode):
            raise classify(self.source, NotARegularFile(errno.EPERM, "is not a regular file", self.source))
        return "file"

    def refuse_into_itself(self, verb: str) -> None:
        if self.target_parts[: len(self.source_parts)] == self.source_parts:
            raise Refusal(
                ToolErrorCategory.INVALID_ARGUMENTS,
                f"cannot {verb} the folder {self.source!r} into itself ({self.destination!r})",
            )


def _copy_one(from_folder: int, name: str, to_folder: int, new_name: str, shown: str) -> None:
    try:
        src = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=from_folder
        )
        try:
            info = os.fstat(src)
            if not stat.S_ISREG(info.st_mode):
                raise NotARegularFile(errno.EPERM, "is not a regular file", shown)
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
            dst = os.open(new_name, flags, stat.S_IMODE(info.st_mode), dir_fd=to_folder)
            try:
                target = os.fstat(dst)
                if not stat.S_ISREG(target.st_mode):
                    raise NotARegularFile(errno.EPERM, "is not a regular file", new_name)
                if (target.st_dev, target.st_ino) == (info.st_dev, info.st_ino):
                    raise Refusal(
                        ToolErrorCategory.INVALID_ARGUMENTS, f"{shown!r} would be copied onto itself"
                    )
                os.ftruncate(dst, 0)
                while chunk := os.read(src, _COPY_CHUNK):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(dst, view) :]
                os.fchmod(dst, stat.S_IMODE(info.st_mode))
            finally:
                os.close(dst)
        finally:
            os.close(src)
    except OSError as error:
        if error.errno == errno.ELOOP:
            error = PathHasSymlink(errno.ELOOP, "is a symbolic link", shown)
        raise classify(shown, error) from error


def _copy_tree(from_folder: int, name: str, to_folder: int, new_name: str, shown: str) -> None:
    """Copy the folder ``name``'s contents into the (new, empty) folder ``new_name``."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        src = os.open(name, flags, dir_fd=from_folder)
        dst = os.open(new_name, flags, dir_fd=to_folder)
    except OSError as error:
        raise classify(shown, error) from error
    try:
        with os.scandir(src) as found:
            entries = sorted(found, key=lambda e: e.name)
        for entry in entries:
            inner = f"{shown.rstrip('/')}/{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                try:
                    os.mkdir(entry.name, 0o777, dir_fd=dst)
                except OSError as error:
                    raise classify(inner, error) from error
                _copy_tree(src, entry.name, dst, entry.name, inner)
            elif entry.is_symlink():
                raise classify(inner, PathHasSymlink(errno.ELOOP, "is a symbolic link", inner))
            else:
                _copy_one(src, entry.name, dst, entry.name, inner)
    finally:
        os.close(src)
        os.close(dst)


def _exists(folder: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _entry_type(entry: os.DirEntry[str]) -> str:
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    return "file" if entry.is_file(follow_symlinks=False) else "other"
