"""Cursor pagination over creation time: stable while new rows arrive, no COUNT(*) per page."""

from rest_framework.pagination import CursorPagination


class CreatedCursorPagination(CursorPagination):
    ordering = ("-created_at", "-id")
    page_size_query_param = "page_size"
    max_page_size = 200
