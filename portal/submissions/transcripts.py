"""Transcript validation for uploads: the one place the portal decides what a transcript must be.

The format belongs to the agents (issue 9, ``agents/transcript.py``, docs/agents.md): JSONL with a
header line, events in turn order and a footer. This module calls that validator and adds what
only the portal knows: the transcript must be about the task it is filed under, under the
submission's guidance condition and mode, with the submission's turn budget and within it. Extend the checks here.
"""

from __future__ import annotations

from agents.importers import import_log
from agents.transcript import MAX_TRANSCRIPT_BYTES, Event, Header, Transcript, TranscriptError, parse
from evaluator.bundle_problems import Problem
from evaluator.manifest import Manifest


def check_transcript(path: str, data: bytes, *, slug: str, guidance: str, budget: int, mode: str = "kernel",
                     ) -> tuple[Transcript | None, list[Problem]]:
    try:
        transcript = parse(data, budget=budget)
    except TranscriptError as exc:
        return None, [Problem(path, "transcript", str(exc))]
    problems = []
    header = transcript.header
    if header.task != slug:
        problems.append(Problem(path, "transcript", f"its header is for task {header.task!r}, not {slug!r}"))
    if header.guidance != guidance:
        problems.append(Problem(path, "transcript",
                                f"its header says guidance {header.guidance!r}; the manifest says {guidance!r}"))
    if header.budget != budget:  # the budget is part of what pairs two runs (PORTAL.md)
        problems.append(Problem(path, "transcript",
                                f"its header says a turn budget of {header.budget}; the manifest says {budget}"))
    if header.mode != mode:
        problems.append(Problem(path, "transcript",
                                f"its header is a {header.mode} run; the manifest says mode {mode!r}"))
    return (None, problems) if problems else (transcript, [])


def convert_log(path: str, data: bytes, fmt: str, manifest: Manifest, slug: str, guidance_sha256: str = ""
                ) -> tuple[bytes, Problem | None]:
    """Another harness's log (``fmt``: openai-chat, openai-responses, anthropic) as our JSONL, with
    the header the manifest implies (AGENTS.md: teams upload what they already have). The
    converter is the one ``python -m agents import`` uses, and it validates what it produces."""
    header = Header(provider=manifest.provider, model=manifest.model, harness=manifest.harness,
                    guidance=manifest.guidance, mode=manifest.mode, budget=manifest.budget, task=slug,
                    guidance_sha256=guidance_sha256)
    if len(data) > MAX_TRANSCRIPT_BYTES:
        return b"", Problem(path, "transcript", f"is {len(data):,} bytes; the limit is {MAX_TRANSCRIPT_BYTES:,}")
    try:
        return import_log(data, fmt, header).dumps().encode("utf-8"), None
    except ValueError as exc:  # ImportErrorBadLog, TranscriptError, a field pydantic refuses
        return b"", Problem(path, "transcript", f"as a log in the {fmt} format: {str(exc)[:500]}")
    except RecursionError:
        return b"", Problem(path, "transcript", f"as a log in the {fmt} format: nested too deeply")


__all__ = ["TranscriptError", "check_transcript", "convert_log", "event_matches", "transcript_events"]


def event_matches(event: Event, query: str) -> bool:
    """Whether an event's text, a tool call's name or its arguments contain ``query`` (any case):
    the transcript viewer's search, for moderators looking for suspicious actions (a file read
    outside the workdir, a network call, a timer patched) and for teams."""
    needle = query.casefold()
    texts = [event.content, *(f"{c.name} {c.arguments}" for c in event.tool_calls or ())]
    return any(needle in t.casefold() for t in texts)


def transcript_events(data: bytes) -> Transcript:
    """Parse a stored (already validated) transcript for display: the line rules only, so a
    transcript stored before a later structure rule still shows."""
    return parse(data, require_footer=False, strict=False)
