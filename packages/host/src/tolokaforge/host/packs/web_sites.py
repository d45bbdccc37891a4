"""``initial_state.mock_web``: the site a task declares, checked, and what travels with it.

``base_url`` (public) names the site; ``root`` (ours) is a folder of the pack whose files the site
serves at ``/``; ``routes`` (ours) is a module of the pack's code whose ``ROUTES`` dict maps
``"METHOD /path/{param}"`` to ``handler(data, request)`` (``tolokaforge.sdk.web``). The site is
served by shipped_tools/mock_site.py inside the trial's worker; the pack's code bundle carries text
only, so a site's binary files (images...) travel base64-encoded beside it (:func:`binary_site_files`).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from tolokaforge.core.models import ToolDescription, ToolSource

from .builtin_tools import SHIPPED_PACKAGE
from .code_probe import ProbeError, code_probe
from .problems import ProblemLog
from .shipped_tools.mock_site import PUBLIC_HOSTS, SITE_FILES, site_tool_key
from .shipped_tools.site_routes import RouteTable
from .task_parts import resolve

__all__ = ["SITE_TOOL", "SiteDeclaration", "binary_site_files", "read_mock_web", "site_origins", "site_tool"]

SITE_TOOL = "_site_request"
"""The hidden tool the runner's browser sends a task's site requests to (BrowserSettings.site_tool)."""
_KEYS = ("base_url", "root", "routes")
_BINARY_LIMIT = 8 * 1024 * 1024
"""A site's binary file travels in every trial's code bundle: one this large is a mistake."""


@dataclass(frozen=True)
class SiteDeclaration:
    """A task's usable ``mock_web`` block; paths relative to the pack root."""

    folder: str
    """The task's folder: the site's key, and what the public-style site serves."""
    base_url: str
    root: str | None = None
    routes: str | None = None
    """The routes module, dotted, from the pack root."""

    def settings(self) -> dict[str, Any]:
        """The site's entry of services.json (mock_site.py reads it in the trial's worker)."""
        return {"base_url": self.base_url, "root": self.root, "routes": self.routes}

    def served_folder(self) -> str:
        return self.root if self.root is not None else self.folder


def read_mock_web(log: ProblemLog, block: dict[str, Any], file: Path) -> SiteDeclaration | None:
    """The task's site, or None after logging why each bad key is bad."""
    for key in block:
        if key not in _KEYS:
            log.add(
                file,
                f"initial_state.mock_web.{key}",
                f"is not supported (the known keys: {', '.join(_KEYS)}; browser settings live under "
                "tools.agent.browser)",
            )
    url = block.get("base_url")
    parts = urlsplit(url) if isinstance(url, str) else None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.netloc
        or parts.path not in ("", "/")
    ):
        log.add(
            file,
            "initial_state.mock_web.base_url",
            "must be an http(s) URL with a host and no path, e.g. http://mock-web:8080",
        )
        return None
    assert isinstance(url, str)
    root = _root(log, block.get("root"), file)
    routes = _routes(log, block.get("routes"), file)
    if root is False or routes is False:
        return None
    folder = file.parent.resolve().relative_to(log.root.resolve()).as_posix()
    return SiteDeclaration(folder, url, root, routes)


def _root(log: ProblemLog, written: object, file: Path) -> str | Literal[False] | None:
    """``root``: the folder (relative to the pack root), None when not given, False when bad."""
    if written is None:
        return None
    where = "initial_state.mock_web.root"
    if not isinstance(written, str) or not written:
        log.add(file, where, "must name a folder of the pack (the site's static files, served at /)")
        return False
    pack = log.root.resolve()
    found = resolve(log.root, written, file.parent)
    if found is None or not found.is_dir() or not found.is_relative_to(pack):
        log.add(file, where, f"{written!r} is not a folder inside the pack")
        return False
    return found.relative_to(pack).as_posix()


def _routes(log: ProblemLog, written: object, file: Path) -> str | Literal[False] | None:
    """``routes``: the module's dotted path from the pack root, checked by importing it; False when bad."""
    if written is None:
        return None
    where = "initial_state.mock_web.routes"
    if not isinstance(written, str) or not written:
        log.add(file, where, "must name a python module of the pack (dotted, or a .py file)")
        return False
    if (not written.endswith(".py") and "/" in written) or written.endswith((".yaml", ".yml", ".json")):
        log.add(
            file,
            where,
            f"{written!r} is not supported: routes names a python module of the pack (dotted, or a .py "
            "file) whose ROUTES dict maps 'METHOD /path' to a handler; route files of canned answers "
            "(the public docs' mock_web/routes.yaml) are not read",
        )
        return False
    module = _module_path(log.root, written, file.parent)
    if module is None:
        log.add(file, where, f"module {written!r} not found (looked in the task's folder and the pack root)")
        return False
    try:
        declared = code_probe().routes(module)
    except ProbeError as error:  # the pack's import-time failure is the pack's defect, reported as such
        log.add(file, where, str(error))
        return False
    if not declared:
        log.add(
            file, where, f"module {module!r} has no ROUTES dict of 'METHOD /path' -> handler(data, request)"
        )
        return False
    for row in declared:
        if not row["text"]:
            log.add(file, where, f"ROUTES of {module!r}: a key is 'METHOD /path', not {row['key']}")
            return False
    try:
        # The keys checked as the trial's worker will parse them; handlers stand in by whether they are callable.
        RouteTable({row["key"]: _stand_in if row["callable"] else None for row in declared})
    except ValueError as error:
        log.add(file, where, f"ROUTES of {module!r}: {error}")
        return False
    return module


def _stand_in(data: object, request: object) -> None:
    """A route's handler as the loader sees it: only the pack's worker calls the real one."""


def _module_path(root: Path, written: str, folder: Path) -> str | None:
    """A dotted path or a .py file, from the task's folder then the pack root, as dotted from the root."""
    pack = root.resolve()
    if written.endswith(".py"):
        found = resolve(root, written, folder)
        candidates = [found.with_suffix("")] if found is not None and found.is_file() else []
    else:
        relative = Path(*written.split("."))
        candidates = [(base / relative).resolve() for base in (folder, root)]
    for candidate in candidates:
        if (candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file()) and (
            candidate.is_relative_to(pack)
        ):
            return ".".join(candidate.relative_to(pack).parts)
    return None


def site_origins(site: SiteDeclaration) -> list[str]:
    """The origins the browser may reach for ``site``: its own, then the public mock service's names."""
    parts = urlsplit(site.base_url)
    origins = [f"{parts.scheme}://{parts.netloc}"]
    for host in PUBLIC_HOSTS:
        origin = f"http://{host}"
        if origin not in origins:
            origins.append(origin)
    return origins


def site_tool(site: SiteDeclaration) -> ToolDescription:
    """The hidden tool that answers one request to ``site`` in the trial's worker."""
    return ToolDescription(
        name=SITE_TOOL,
        description="Answers one request the task's browser sends to its mock site (the runner calls it).",
        parameters={
            "type": "object",
            "properties": {
                "method": {"type": "string", "minLength": 1},
                "url": {"type": "string", "minLength": 1},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "body_b64": {"type": "string"},
            },
            "required": ["method", "url"],
            "additionalProperties": False,
        },
        source=ToolSource(module_path=f"{SHIPPED_PACKAGE}.mock_site", class_name=site_tool_key(site.folder)),
        category="write",
        timeout_s=20.0,
        hidden=True,
    )


def binary_site_files(log: ProblemLog, site: SiteDeclaration, file: Path) -> dict[str, str]:
    """The served folder's files that are not UTF-8 text, as bundle entries of their base64 text."""
    folder = log.root / site.served_folder()
    shipped: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(log.root)
        if not path.is_file() or any(
            part.startswith(".") or part == "__pycache__" for part in relative.parts
        ):
            continue
        data = path.read_bytes()
        try:
            data.decode("utf-8")
            continue  # text: the bundle carries it as it is
        except UnicodeDecodeError:
            pass
        if len(data) > _BINARY_LIMIT:
            log.add(file, "initial_state.mock_web", f"the site's file {relative.as_posix()} is over 8 MiB")
            continue
        shipped[f"{SHIPPED_PACKAGE}/{SITE_FILES}/{relative.as_posix()}.b64"] = base64.b64encode(data).decode()
    return shipped
