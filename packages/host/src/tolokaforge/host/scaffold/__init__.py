"""``tolokaforge init DIR``: a one-task pack that validates and passes its golden run.

The files are real files under ``template/`` (so they read like a pack, and a test runs them), copied
with the pack name substituted into ``pack.yaml``.
"""

from __future__ import annotations

import re
import shutil
from importlib.resources import as_file, files
from pathlib import Path

from ..errors import ConfigError

__all__ = ["init_pack"]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def init_pack(target: Path, name: str | None = None) -> list[Path]:
    """Write the starter pack into ``target`` (missing or empty); returns the files written."""
    pack_name = name or re.sub(r"[^a-z0-9_]", "_", target.resolve().name.lower()).strip("_") or "my_pack"
    if not _NAME.match(pack_name):
        raise ConfigError(
            f"pack name {pack_name!r} must be lower-case letters, digits and _, starting with a letter"
        )
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ConfigError(f"{target} exists and is not an empty folder: init writes only into a new one")
    with as_file(files("tolokaforge.host.scaffold").joinpath("template")) as template:
        shutil.copytree(template, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    pack_yaml = target / "pack.yaml"
    pack_yaml.write_text(pack_yaml.read_text(encoding="utf-8").replace("NAME", pack_name), encoding="utf-8")
    return sorted(path for path in target.rglob("*") if path.is_file())
