"""Keep a pack's plain-named helper packages from leaking into the next pack imported in one process.

Public-style pack code puts its own folder on ``sys.path`` and imports helpers by plain name
(``from tau_tools import ...``). Two packs each with a ``tau_tools`` would then share the first one's
modules. :func:`imported_in_isolation` imports a module and afterwards forgets every module that the
import added from files inside the pack root under a plain name, and the ``sys.path`` entries it
added: the imported module keeps what it bound, and the name is free for the next pack.
"""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path
from types import ModuleType

__all__ = ["imported_in_isolation"]

# One pack import at a time per process: each restores sys.path and sys.modules as it found them, so two
# overlapping ones (registrations run in threads) would undo each other's sys.path entries mid-import.
_one_at_a_time = threading.RLock()


def imported_in_isolation(qualified_name: str, root: Path, own_prefix: str) -> ModuleType:
    """Import ``qualified_name``; then drop plain-named modules it loaded from under ``root``.

    ``own_prefix`` is the synthetic package the pack is mounted as; its modules are kept.
    """
    loaded = sys.modules.get(qualified_name)
    # Imported already (and not still being imported by another thread): importing again would add
    # nothing to forget, so skip the bookkeeping over every loaded module.
    if loaded is not None and not getattr(getattr(loaded, "__spec__", None), "_initializing", False):
        return loaded
    with _one_at_a_time:
        return _import(qualified_name, root, own_prefix)


def _import(qualified_name: str, root: Path, own_prefix: str) -> ModuleType:
    before = set(sys.modules)
    path_before = list(sys.path)
    try:
        return importlib.import_module(qualified_name)
    finally:
        base = root.resolve()
        for name in set(sys.modules) - before:
            if name == own_prefix or name.startswith(own_prefix + "."):
                continue
            location = getattr(sys.modules[name], "__file__", None)
            if location is not None and Path(location).resolve().is_relative_to(base):
                del sys.modules[name]
        sys.path[:] = path_before
