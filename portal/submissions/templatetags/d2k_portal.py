"""Small template filters for the submission pages."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def get(mapping: dict, key: object) -> object:
    return mapping.get(key) if mapping else None


@register.filter
def percent(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"
