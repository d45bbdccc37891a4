"""τ² tests: litellm (which τ²'s evaluator and registry import) must never fetch its price list."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
