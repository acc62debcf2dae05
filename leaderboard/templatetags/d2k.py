"""Template filters: safe Markdown and engineering-notation numbers.

Markdown is rendered by markdown-it-py with raw HTML disabled (any ``<script>`` in a file is
shown as text) and its default link validation (no ``javascript:`` or ``data:`` links), so the
output can be marked safe. Task files are ours, but task pages must stay safe if one is wrong.
"""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

register = template.Library()

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")


@register.filter
def markdown(text: str, below: int = 0) -> SafeString:
    """Render Markdown to HTML with raw HTML escaped. ``below`` moves every heading that many
    levels down (at most h6), so a document embedded under a page's own headings (guidance files
    open with a level-1 heading) does not add a second ``h1`` to the page."""
    tokens = _md.parse(text or "")
    if below:
        for token in tokens:
            if token.type in ("heading_open", "heading_close"):
                token.tag = f"h{min(6, int(token.tag[1]) + int(below))}"
    return mark_safe(_md.renderer.render(tokens, _md.options, {}))  # noqa: S308 - html=False escapes every raw tag


_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


@register.filter
def si(value: float | int | None, unit: str = "") -> str:
    """``335544320`` -> ``335.5 M`` (with ``unit`` appended): FLOPs and bytes at a glance."""
    if value is None:
        return "-"
    v = float(value)
    for scale, prefix in _PREFIXES:
        if abs(v) >= scale:
            return f"{v / scale:.1f} {prefix}{unit}"
    return f"{v:g} {unit}".rstrip()


@register.filter
def shape(dims: list[int]) -> str:
    """``[16384, 4096]`` -> ``16384 × 4096``; a scalar tensor shows as ``()``."""
    return " × ".join(str(d) for d in dims) if dims else "()"


@register.filter
def us(ms: float | None) -> str:
    """A time in milliseconds shown in microseconds with thousands separators: 0.1365 -> '136.5'."""
    if ms is None:
        return "-"
    return f"{ms * 1e3:,.1f}"


@register.filter
def get(mapping: dict | None, key: object) -> object:
    """``mapping[key]`` in a template, trying the key as given and as a string (JSON keys are strings)."""
    if not mapping:
        return None
    if key in mapping:
        return mapping[key]
    return mapping.get(str(key))


@register.filter
def pct(value: float | None) -> str:
    """A fraction as a percentage, or '-' when unknown."""
    if value is None:
        return "-"
    return f"{100 * value:.1f}%"
