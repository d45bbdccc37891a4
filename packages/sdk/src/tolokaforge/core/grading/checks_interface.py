"""Public packs' name for :mod:`tolokaforge.sdk.checks_interface`: the same objects, re-exported."""

from tolokaforge.sdk.checks_interface import *  # noqa: F403
from tolokaforge.sdk.checks_interface import __all__ as __all__
