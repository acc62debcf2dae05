"""Cursor pagination: stable while new rows arrive, no COUNT(*) per page."""

from rest_framework.pagination import CursorPagination


class CreatedCursorPagination(CursorPagination):
    ordering = ("-created_at", "-id")
    page_size_query_param = "page_size"
    max_page_size = 200


class QueueCursorPagination(CursorPagination):
    """The moderation queue's order, oldest evaluation first, so a moderator pages through the
    backlog in the order it should be worked."""

    ordering = ("updated_at", "id")
    page_size_query_param = "page_size"
    max_page_size = 200
