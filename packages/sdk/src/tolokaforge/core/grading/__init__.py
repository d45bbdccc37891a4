"""Public packs' names for the checks API: :mod:`tolokaforge.sdk.checks_interface` and ``checks_helpers``.

Shipped by tolokaforge-sdk inside ``tolokaforge.core``'s folder (packages/sdk/README.md says how).
"""
