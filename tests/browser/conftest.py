"""The browser tests reuse the portal's fixtures (catalogue, private media, a real worker)."""

from tests.portal.conftest import catalogue, media, portal_worker  # noqa: F401
