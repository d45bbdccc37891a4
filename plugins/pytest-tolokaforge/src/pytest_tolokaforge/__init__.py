"""pytest-tolokaforge: ``pytest --tolokaforge-pack=PATH`` turns a Tolokaforge task pack into contract tests.

The plugin (entry point ``pytest11: tolokaforge = pytest_tolokaforge.plugin``) generates, per task,
the items ``load``, ``golden``, ``resolve``, ``taxonomy`` and ``determinism``, plus the runner's own
contract items once per session, and offers fixtures for authors' tests. See the README.
"""

from __future__ import annotations

from .errors import CheckFailure
from .fixtures import TolokaforgeRunner, Trial, TrialFactory
from .options import CHECKS

__all__ = ["CHECKS", "CheckFailure", "TolokaforgeRunner", "Trial", "TrialFactory"]
