"""Public packs' name for :mod:`tolokaforge.sdk.tools_interface`: the same objects, re-exported.

Shipped by tolokaforge-sdk inside ``tolokaforge.core``'s folder (packages/sdk/README.md says how).
"""

from tolokaforge.sdk.tools_interface import *  # noqa: F403
from tolokaforge.sdk.tools_interface import __all__ as __all__
