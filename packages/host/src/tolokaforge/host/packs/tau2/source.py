"""``tau2:<domain>``: which τ² domain a ``--pack`` value names, and the splits it offers."""

from __future__ import annotations

import difflib
import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import PackLoadError, PackProblem

__all__ = ["DOMAINS", "TAU2_PREFIX", "Tau2Source", "is_tau2_source"]

TAU2_PREFIX = "tau2:"
DOMAINS = ("airline", "retail", "telecom", "mock")
"""The τ² domains this adapter runs (τ²'s registry also lists ``telecom-workflow``, a policy variant)."""
FULL = "full"
"""The split name for every task of a domain, where τ²'s split file has no such entry."""


def is_tau2_source(path: Path | str) -> bool:
    return str(path).startswith(TAU2_PREFIX)


def _refuse(spec: str, message: str) -> PackLoadError:
    return PackLoadError([PackProblem(Path(spec), "", message)])


@dataclass(frozen=True)
class Tau2Source:
    """A τ² domain as the installed τ² ships it."""

    domain: str

    @classmethod
    def parse(cls, spec: str) -> Tau2Source:
        name = spec.removeprefix(TAU2_PREFIX)
        if name not in DOMAINS:
            close = difflib.get_close_matches(name, DOMAINS, n=1)
            hint = f" (did you mean: {TAU2_PREFIX}{close[0]}?)" if close else ""
            raise _refuse(spec, f"unknown τ² domain {name!r}{hint}; choose one of {', '.join(DOMAINS)}")
        return cls(name)

    @property
    def label(self) -> str:
        return f"{TAU2_PREFIX}{self.domain}"

    def environment_module(self) -> Any:
        """τ²'s ``tau2.domains.<domain>.environment`` (imported without τ²'s registry, which loads litellm)."""
        # litellm, if anything imports it, must not fetch its price list from the network.
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        try:
            from loguru import logger

            logger.disable("tau2")  # τ² logs to stderr at import (a missing .env file) and per call
            return importlib.import_module(f"tau2.domains.{self.domain}.environment")
        except ModuleNotFoundError as error:
            raise _refuse(
                self.label,
                f"τ²-bench is not installed ({error}); install it with: pip install 'tolokaforge-host[tau2]'",
            ) from error

    def splits(self) -> dict[str, list[str]]:
        """Split name -> τ² task ids, as τ²'s split file gives them (no file: every task is ``base``)."""
        module = self.environment_module()
        loader = getattr(module, "get_tasks_split", None)
        return dict(loader()) if loader is not None else {}
