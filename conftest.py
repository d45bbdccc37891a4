"""Settings every test of the repository shares."""

from __future__ import annotations

import os

from hypothesis import settings

# Timing belongs in tools/bench/, never in assertions: hypothesis' per-example deadline is one, and it
# fails examples that merely ran while the machine was busy. CI also derandomizes, so a red run is
# reproducible from its log.
settings.register_profile("tolokaforge", deadline=None, derandomize=bool(os.environ.get("CI")))
settings.load_profile("tolokaforge")
