"""Public packs' name for :mod:`tolokaforge.sdk.checks_helpers`: the same objects, re-exported."""

from tolokaforge.sdk.checks_helpers import *  # noqa: F403
from tolokaforge.sdk.checks_helpers import __all__ as __all__
