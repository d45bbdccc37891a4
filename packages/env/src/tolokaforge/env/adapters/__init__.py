"""Adapters from :mod:`tolokaforge.env` to the RL libraries trainers use: verifiers and OpenEnv.

Each lives in its own module and imports its library, an optional extra of ``tolokaforge-env``
(``tolokaforge-env[verifiers]``, ``tolokaforge-env[openenv]``); importing this package needs neither.
"""

from __future__ import annotations
