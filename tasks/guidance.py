"""Guidance conditions and the digest that names one version of a task's guidance.

A guided run is only interpretable against the exact guidance text its agent was given, and that
text changes as the experts' designs do (a session adds what a measurement taught). So a run
states the digest of what it saw, and the site keeps every version it has published under its
digest: a reader of a result can open the very text, and tell a run on current guidance from one
on an earlier version. One function computes the digest, from the level texts, for the agent
harness (from the tree) and the portal (from the task rows) alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

#: Each condition and the guidance levels it gives the agent, in order.
CONDITIONS: dict[str, tuple[str, ...]] = {
    "none": (), "L1": ("L1",), "L1+L2": ("L1", "L2"), "L1+L2+L3": ("L1", "L2", "L3"),
}
#: A digest as runs state it (64 lowercase hex digits), for the manifest's and the transcript's schemas.
DIGEST_RE = "[0-9a-f]{64}"


def guidance_digest(texts: Mapping[str, str], condition: str) -> str:
    """SHA-256 of the guidance ``condition`` gives, over ``texts`` (level -> Markdown): "" for
    ``none``. Each level is hashed as the agent reads it (stripped of surrounding blank lines,
    as the prompt shows it), under its level name, so moving a paragraph between levels is a new
    version too."""
    levels = CONDITIONS[condition]
    if not levels:
        return ""
    h = hashlib.sha256()
    for level in levels:
        h.update(f"{level}\n{texts[level].strip()}\n\0".encode())
    return h.hexdigest()


def guidance_text(texts: Mapping[str, str], condition: str) -> str:
    """The levels ``condition`` gives, as one Markdown document (what a version page shows): each
    level's file as written (each opens with its own heading), in order, between rules."""
    return "\n\n---\n\n".join(texts[level].strip() for level in CONDITIONS[condition])


def guided_versions(texts: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(condition, digest, text) of every guided condition over ``texts``: what a sync keeps as
    the published versions (leaderboard.services, and the migration that backfilled them)."""
    return [(c, guidance_digest(texts, c), guidance_text(texts, c)) for c, levels in CONDITIONS.items() if levels]
