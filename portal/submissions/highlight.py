"""Server-side highlighting (pygments): kernel source and diffs arrive escaped, with no script."""

from __future__ import annotations

import difflib

from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, PythonLexer

_FORMATTER = HtmlFormatter(linenos="table", cssclass="hl", wrapcode=True)
_DIFF_FORMATTER = HtmlFormatter(cssclass="hl", wrapcode=True)


def highlight_python(source: str) -> SafeString:
    # pygments escapes every token it emits, so the result is safe to mark as such.
    return mark_safe(highlight(source, PythonLexer(), _FORMATTER))  # noqa: S308


def highlight_diff(old: str, new: str, old_name: str, new_name: str) -> SafeString:
    diff = "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=old_name, tofile=new_name))
    return mark_safe(highlight(diff or "(no change)\n", DiffLexer(), _DIFF_FORMATTER))  # noqa: S308


def stylesheet() -> str:
    return _FORMATTER.get_style_defs(".hl")
