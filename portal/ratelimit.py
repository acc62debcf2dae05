"""Counting a client's attempts in a shared cache, for the limits PORTAL.md asks for (sign-in
failures, token creation), and the client's address behind the deployment's proxies.

The API's throttles are DRF's own; these are the browser-side ones, and they use the same idea
of a client (``D2K_PROXY_HOPS`` sets DRF's ``NUM_PROXIES`` too), so both count the caller, not
the TLS proxy in front of gunicorn.
"""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str:
    """The caller's address: ``REMOTE_ADDR`` with no proxy in front; behind ``D2K_PROXY_HOPS``
    trusted proxies, the address the outermost of them saw, read from the right of
    ``X-Forwarded-For`` (the left part is whatever the client chose to send)."""
    hops = settings.D2K_PROXY_HOPS
    remote = request.META.get("REMOTE_ADDR", "") or "?"
    if hops <= 0:
        return remote
    chain = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
    return chain[-hops] if len(chain) >= hops else (chain[0] if chain else remote)


def exceeded(*keys: str, limit: int) -> bool:
    """Whether any of ``keys`` has reached ``limit`` in its current window."""
    return any(cache.get(key, 0) >= limit for key in keys)


def count(*keys: str, window_s: int = 60) -> None:
    """One more attempt on each key; a key's window starts at its first attempt."""
    for key in keys:
        cache.add(key, 0, timeout=window_s)
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr: start again
            cache.set(key, 1, timeout=window_s)
