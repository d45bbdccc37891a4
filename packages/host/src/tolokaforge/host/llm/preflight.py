"""Is the model endpoint there at all? Asked once, before any trial, so a wrong URL costs seconds.

Any HTTP answer to ``GET <base>/models`` counts as reachable (a 401 or 404 still proves a server is
listening; the first completion reports what is wrong with it). No answer within the budget — refused,
unresolvable, hung — is an :class:`EndpointUnreachableError`.
"""

from __future__ import annotations

import aiohttp

from ..errors import EndpointUnreachableError

__all__ = ["check_endpoint"]


async def check_endpoint(session: aiohttp.ClientSession, base_url: str, *, budget_s: float = 10.0) -> int:
    """The HTTP status ``GET <base_url>/models`` answered with."""
    url = base_url.rstrip("/") + "/models"
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=budget_s)) as response:
            return response.status
    except TimeoutError as error:
        raise EndpointUnreachableError(
            f"model endpoint {base_url} did not answer within {budget_s:g}s"
        ) from error
    except aiohttp.ClientError as error:
        raise EndpointUnreachableError(
            f"model endpoint {base_url} cannot be reached: {type(error).__name__}: {error}"
        ) from error
