"""The services a task declares in ``initial_state`` and the built-in tools that reach them.

``initial_state.rag`` (a corpus folder) backs ``search_kb``; ``initial_state.mock_web`` (a base URL, and
optionally the site's own files and routes, web_sites.py) backs ``http_request`` and the hidden tool
that answers the ``browser``'s requests. These are python tools whose code we ship in the pack's code bundle
(``shipped_tools/``, copied under ``_tolokaforge_builtin/``), with ``services.json`` naming what the pack's
tasks declare: they run in the trial's worker, inside its sandbox, like the pack's own tools. Every key
of those blocks that this harness does not implement is refused with its path (docs/pack-format.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tolokaforge.core.models import ToolCode, ToolDescription, ToolSource

from .builtin_tools import SHIPPED_PACKAGE, shipped_bundle
from .files import TaskFile
from .problems import ProblemLog
from .web_sites import SiteDeclaration, binary_site_files, read_mock_web, site_tool

__all__ = ["SERVICE_TOOLS", "TYPESENSE_URL_VARIABLE", "PackServices"]

PACKAGE = SHIPPED_PACKAGE
_SHIPPED = Path(__file__).with_name("shipped_tools")
_MODULES = {"search_kb": "knowledge_base", "http_request": "mock_site"}
_HELPERS = ("typesense_corpus", "site_routes")
"""Shipped modules the tools' modules import."""
TYPESENSE_URL_VARIABLE = "TOLOKAFORGE_TYPESENSE_URL"
"""Set when the pack is loaded: ``search_kb`` keeps its corpora in that Typesense server instead."""
SERVICE_TOOLS = tuple(_MODULES)
"""Built-in tools served by code shipped with the pack, each needing the service its task declares."""

_SCHEMAS: dict[str, dict[str, Any]] = {
    "search_kb": {
        "description": "Search the knowledge base (the task's documents) for passages relevant to a query.",
        "category": "read",
        "timeout_s": 15.0,
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "What to look for"},
                "top_k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 100,
                    "default": 5,
                    "description": "How many documents to return (default 5)",
                },
                "alpha": {
                    "type": "number",
                    "minimum": 0.0,
                    "maximum": 1.0,
                    "default": 0.5,
                    "description": "Weight of semantic over keyword ranking (0 keyword only, 1 semantic only)",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
    "http_request": {
        "description": "Send an HTTP request to the task's mock web services.",
        "category": "compute",
        "timeout_s": 20.0,
        "parameters": {
            "type": "object",
            "properties": {
                "method": {"type": "string", "enum": ["GET", "POST", "PUT", "DELETE"]},
                "url": {"type": "string", "description": "A URL of the task's mock services"},
                "headers": {"type": "object", "description": "Optional HTTP headers"},
                "json": {"type": "object", "description": "Optional JSON body (POST, PUT)"},
                "data": {"type": "object", "description": "Optional form body (POST, PUT)"},
            },
            "required": ["method", "url"],
            "additionalProperties": False,
        },
    },
}


@dataclass
class PackServices:
    """What a pack's tasks declare, gathered while they load, then shipped with the pack's code."""

    log: ProblemLog
    corpora: set[str] = field(default_factory=set[str])
    sites: dict[str, SiteDeclaration] = field(default_factory=dict[str, SiteDeclaration])
    """Task folder -> the site its task declares."""
    task_sites: dict[Path, SiteDeclaration] = field(default_factory=dict[Path, SiteDeclaration])
    """Task file -> its usable site (for its browser settings)."""
    site_files: dict[str, str] = field(default_factory=dict[str, str])
    """The sites' binary files, as bundle entries (web_sites.binary_site_files)."""
    _served: set[str] = field(default_factory=set[str])

    def tools(self, spec: TaskFile, file: Path, provided: set[str]) -> list[ToolDescription]:
        """Check the task's ``rag`` and ``mock_web`` blocks; the service tools it enables, described.

        A name in ``provided`` (the task's own python module has a tool of that name) stays the pack's.
        Beside a module or an MCP server, ``search_kb`` and ``http_request`` are still ours. A task
        enabling ``browser`` with a site gets the hidden site tool too.
        """
        block = spec.initial_state
        corpus = self._corpus(block.rag, file) if block.rag is not None else None
        site = self._site(block.mock_web, file) if block.mock_web is not None else None
        agent = spec.tools.agent if spec.tools is not None else None
        if agent is None:
            return []
        described: list[ToolDescription] = []
        if site is not None and "browser" in (agent.enabled or ()):
            hidden = site_tool(self.sites[site])
            if hidden.name in provided:
                self.log.add(
                    file, "tools.agent.python", f"the tool name {hidden.name!r} is reserved for the site"
                )
            else:
                described.append(hidden)
        for index, name in enumerate(agent.enabled or ()):
            if name in provided:
                continue
            if name == "search_kb":
                if corpus is None and block.rag is None:
                    self.log.add(
                        file, f"tools.agent.enabled[{index}]", "search_kb needs initial_state.rag.corpus_dir"
                    )
                elif corpus is not None:
                    described.append(_describe(name, f"search_kb:{corpus}"))
            elif name == "http_request":
                if site is None and block.mock_web is None:
                    self.log.add(
                        file,
                        f"tools.agent.enabled[{index}]",
                        "http_request needs initial_state.mock_web.base_url",
                    )
                elif site is not None:
                    described.append(_describe(name, f"http_request:{site}"))
        if described and (self.log.root / PACKAGE).exists():
            self.log.add(
                file,
                "tools.agent.enabled",
                f"the pack's folder {PACKAGE}/ is reserved for built-in tool code",
            )
            return []
        return described

    def ship(self, code: ToolCode) -> None:
        """Add our tool modules and ``services.json`` to the pack's code bundle, once every task loaded.

        ``services.json`` lists what all the pack's tasks declare, so it exists only now; the bundle the
        tasks already hold (builtin_tools.py's, when they enable shipped tools) gets the files too.
        """
        if code.files is None or not (self.corpora or self.sites):
            return
        if any(path.startswith(f"{PACKAGE}/") for path in code.files):
            return  # the pack has a folder of that name: tools() refused every task that would need it
        added = {f"{PACKAGE}/__init__.py": ""}
        for module in (*_MODULES.values(), *_HELPERS):
            added[f"{PACKAGE}/{module}.py"] = (_SHIPPED / f"{module}.py").read_text(encoding="utf-8")
        settings: dict[str, Any] = {
            "corpora": sorted(self.corpora),
            "sites": {folder: site.settings() for folder, site in sorted(self.sites.items())},
        }
        server = os.environ.get(TYPESENSE_URL_VARIABLE)
        if server and self.corpora:
            settings["typesense"] = server
        added[f"{PACKAGE}/services.json"] = json.dumps(settings, indent=1)
        added.update(self.site_files)
        for bundle in (code, shipped_bundle(code)):
            if bundle is not None and bundle.files is not None:
                bundle.files.update(added)

    def _corpus(self, block: dict[str, Any], file: Path) -> str | None:
        """``rag``: the corpus folder, relative to the pack root, when it is usable."""
        for key in block:
            if key != "corpus_dir":
                self.log.add(file, f"initial_state.rag.{key}", "is not supported (the known key: corpus_dir)")
        written = block.get("corpus_dir")
        where = "initial_state.rag.corpus_dir"
        if not isinstance(written, str) or not written:
            self.log.add(file, where, "is required: the folder of the task's documents (.md, .txt)")
            return None
        root = self.log.root.resolve()
        folder = (file.parent / written).resolve()
        if not folder.is_relative_to(root) or not folder.is_dir():
            self.log.add(file, where, f"{written!r} is not a folder inside the pack")
            return None
        count = 0
        for path in sorted([*folder.glob("*.md"), *folder.glob("*.txt")]):
            try:
                count += bool(path.read_text(encoding="utf-8").strip())
            except UnicodeDecodeError:
                self.log.add(path, "", f"a document of {where} must be UTF-8 text")
                return None
        if count == 0:
            self.log.add(file, where, f"{written!r} holds no non-empty .md or .txt document")
            return None
        relative = folder.relative_to(root).as_posix()
        self.corpora.add(relative)
        return relative

    def _site(self, block: dict[str, Any], file: Path) -> str | None:
        """``mock_web``: the task's folder (relative to the pack root), its site keyed by it."""
        site = read_mock_web(self.log, block, file)
        if site is None:
            return None
        self.sites[site.folder] = site
        self.task_sites[file] = site
        if site.served_folder() not in self._served:
            self._served.add(site.served_folder())
            self.site_files.update(binary_site_files(self.log, site, file))
        return site.folder


def _describe(name: str, class_name: str) -> ToolDescription:
    schema = _SCHEMAS[name]
    return ToolDescription(
        name=name,
        description=schema["description"],
        parameters=schema["parameters"],
        source=ToolSource(module_path=f"{PACKAGE}.{_MODULES[name]}", class_name=class_name),
        category=schema["category"],
        timeout_s=schema["timeout_s"],
    )
