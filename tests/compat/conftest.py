"""The compat suite's collection: the packs' own files are data, not tests of ours.

A terminal task's verifier (the pytest file in its own tests folder) runs in the trial's sandbox
against the agent's work; collected here it would test an empty folder. ``TOLOKAFORGE_PUBLIC_CHECKOUT=none``
leaves out the module that runs the public project's own packs.
"""

from __future__ import annotations

import os

collect_ignore_glob = ["packs/*"]
if os.environ.get("TOLOKAFORGE_PUBLIC_CHECKOUT") == "none":
    collect_ignore = ["test_public_checkout.py"]
