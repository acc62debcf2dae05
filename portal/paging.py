"""One rule for paging the browser's list pages (the moderation queue, a team's submissions, the
published runs): a fixed page size, and a missing or out-of-range ``?page=`` shows the nearest
page instead of an error, so a link to page 7 still works after the list shrank."""

from __future__ import annotations

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest

PAGE_SIZE = 50


def page_of(request: HttpRequest, items: QuerySet, per_page: int = PAGE_SIZE) -> Page:
    """The page of ``items`` that ``?page=`` asks for; ``items`` must be ordered."""
    return Paginator(items, per_page).get_page(request.GET.get("page"))
