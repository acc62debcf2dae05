"""The transcript format: versioned JSONL, one event per line (AGENTS.md, Transcript format).

Line 1 is the run header, then one line per event (a system or user message, a model turn with
its tool calls, a tool result), then a footer with the stop reason and totals. The agent loop
appends each event as it happens and flushes it, so a run killed mid-way leaves a valid prefix
that ``--resume`` continues from. The same models validate uploads in the portal, so a
transcript means one thing everywhere.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from tasks.guidance import DIGEST_RE

TRANSCRIPT_VERSION = 1
MAX_TRANSCRIPT_BYTES = 64 * 2**20  # an upload's transcript, uncompressed
MAX_LINE_BYTES = 4 * 2**20
GUIDANCE_CONDITIONS = ("none", "L1", "L1+L2", "L1+L2+L3")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Usage(_Model):
    input_tokens: int = Field(0, ge=0)
    output_tokens: int = Field(0, ge=0)
    cost_usd: float | None = Field(None, ge=0)


class ToolCall(_Model):
    id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    arguments: str  # the raw JSON text the model produced: kept as sent, even when malformed


class Header(_Model):
    kind: Literal["header"] = "header"
    version: Literal[1] = TRANSCRIPT_VERSION
    provider: str = Field(min_length=1, max_length=100)
    model: str = Field(min_length=1, max_length=200)
    harness: str = Field("d2k-reference", min_length=1, max_length=200)
    guidance: Literal["none", "L1", "L1+L2", "L1+L2+L3"]
    mode: Literal["kernel", "design"] = "kernel"
    budget: int = Field(ge=1, le=100_000)
    task: str = Field(min_length=1, max_length=100)
    #: The digest of the guidance text the run was given (tasks.guidance): "" when not recorded
    #: (an unguided run, or a log from another harness that did not say).
    guidance_sha256: str = Field("", pattern=rf"^({DIGEST_RE})?$")
    started_at: str = ""


class Event(_Model):
    kind: Literal["event"] = "event"
    turn: int = Field(ge=0)  # the model response this event belongs to; 0 before the first
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    usage: Usage | None = None
    ts: str = ""


class Footer(_Model):
    kind: Literal["footer"] = "footer"
    stop_reason: Literal["done", "budget", "provider-error", "interrupted", "imported"]
    turns_used: int = Field(ge=0)
    input_tokens: int = Field(0, ge=0)
    output_tokens: int = Field(0, ge=0)
    cost_usd: float | None = None
    message: str = ""


Line = Annotated[Header | Event | Footer, Field(discriminator="kind")]
_LINE = TypeAdapter(Line)


class Transcript(_Model):
    header: Header
    events: list[Event] = []
    footer: Footer | None = None

    @property
    def turns_used(self) -> int:
        return max((e.turn for e in self.events), default=0)

    def dumps(self) -> str:
        lines = [self.header, *self.events, *([self.footer] if self.footer else [])]
        return "".join(line.model_dump_json(exclude_none=True) + "\n" for line in lines)


class TranscriptError(ValueError):
    """A transcript that does not follow the format; the message names the line and the rule."""


def parse(text: str | bytes, budget: int | None = None, require_footer: bool = True,
          strict: bool = True) -> Transcript:
    """Validate a JSONL transcript; raises :class:`TranscriptError` naming the first bad line.

    ``budget`` (the submission's turn budget) caps the turns the transcript may use. ``strict``
    (uploads, imports, the CLI) also checks that the turns are counted, not claimed: model
    responses are numbered 1, 2, 3... with every other event carrying the turn of the response
    before it, each tool result answers a call of that response, and the footer's totals are the
    events' sums (:func:`_check_structure`). ``strict=False`` is for displaying a transcript stored
    before those rules: it keeps the format's line rules only.
    """
    if isinstance(text, bytes):
        if len(text) > MAX_TRANSCRIPT_BYTES:
            raise TranscriptError(f"transcript is {len(text):,} bytes; the limit is {MAX_TRANSCRIPT_BYTES:,}")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TranscriptError(f"transcript is not UTF-8 (byte {exc.start})") from None
    header: Header | None = None
    events: list[Event] = []
    footer: Footer | None = None
    lines_of: list[int] = []  # each event's line number, for the structure check's messages
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            raise TranscriptError(f"line {n}: longer than {MAX_LINE_BYTES:,} characters")
        if footer is not None:
            raise TranscriptError(f"line {n}: nothing may follow the footer")
        try:
            line = _LINE.validate_python(json.loads(raw))
        except json.JSONDecodeError as exc:
            raise TranscriptError(f"line {n}: not JSON: {exc.msg}") from None
        except RecursionError:
            raise TranscriptError(f"line {n}: not JSON: nested too deeply") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = list(first["loc"])
            if loc and loc[0] in ("header", "event", "footer"):  # the union's tag, not a field
                loc = loc[1:]
            where = ".".join(str(p) for p in loc) or "line"
            raise TranscriptError(f"line {n}: {where}: {first['msg']}") from None
        if isinstance(line, Header):
            if header is not None or events:
                raise TranscriptError(f"line {n}: the header must be the first line, once")
            header = line
        elif header is None:
            raise TranscriptError(f"line {n}: the first line must be the header")
        elif isinstance(line, Event):
            if events and line.turn < events[-1].turn:
                raise TranscriptError(f"line {n}: turn {line.turn} after turn {events[-1].turn}")
            events.append(line)
            lines_of.append(n)
        else:
            footer = line
    if header is None:
        raise TranscriptError("empty transcript: no header")
    if require_footer and footer is None:
        raise TranscriptError("no footer: the transcript is incomplete")
    if strict:
        _check_structure(events, lines_of, footer)
    t = Transcript(header=header, events=events, footer=footer)
    limit = min(budget, header.budget) if budget is not None else header.budget
    if t.turns_used > limit:
        raise TranscriptError(f"uses {t.turns_used} turns; the budget is {limit}")
    if footer is not None and footer.turns_used != t.turns_used:
        raise TranscriptError(f"footer says {footer.turns_used} turns, the events use {t.turns_used}")
    return t


def _check_structure(events: list[Event], lines_of: list[int], footer: Footer | None) -> None:
    """The turn count is the number of model responses, so it must not be a number a file claims.

    A transcript whose responses all say ``turn: 1`` would otherwise pass any budget, and the
    board shows the count beside the score. The agent loop and the importers write exactly this
    structure (``loop.run_agent``, ``importers``).
    """
    responses = 0
    open_calls: set[str] = set()  # the current response's tool calls not yet answered
    for event, n in zip(events, lines_of, strict=True):
        if event.role == "assistant":
            if event.turn != responses + 1:
                raise TranscriptError(f"line {n}: a model response numbered turn {event.turn}; it is response "
                                      f"{responses + 1} (turns count model responses, one each)")
            responses = event.turn
            open_calls = {c.id for c in event.tool_calls or ()}
            continue
        if event.turn != responses:
            raise TranscriptError(f"line {n}: a {event.role} event of turn {event.turn} after model response "
                                  f"{responses}: events between two responses carry the earlier one's turn")
        if event.role == "tool":
            if event.tool_call_id not in open_calls:
                raise TranscriptError(f"line {n}: a tool result for call {event.tool_call_id!r}, which turn "
                                      f"{responses}'s model response did not make (or was answered already)")
            open_calls.discard(event.tool_call_id)
    if footer is None:
        return
    usages = [e.usage for e in events if e.role == "assistant" and e.usage]
    for name in ("input_tokens", "output_tokens"):
        total = sum(getattr(u, name) for u in usages)
        if getattr(footer, name) != total:
            raise TranscriptError(f"footer says {getattr(footer, name):,} {name.replace('_', ' ')}; "
                                  f"the model responses' usage sums to {total:,}")
    if footer.cost_usd is not None:
        total_cost = sum(u.cost_usd for u in usages if u.cost_usd is not None)
        if not math.isclose(footer.cost_usd, total_cost, rel_tol=1e-6, abs_tol=1e-9):
            raise TranscriptError(f"footer says a cost of ${footer.cost_usd:.6g}; "
                                  f"the model responses' costs sum to ${total_cost:.6g}")


def load(path: Path, require_footer: bool = True) -> Transcript:
    return parse(path.read_bytes(), require_footer=require_footer)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one transcript line (header, event or footer), for docs and other harnesses."""
    schema = _LINE.json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"D2K-Bench transcript line, version {TRANSCRIPT_VERSION}"
    schema["description"] = ("A transcript is JSONL: a header line, event lines in turn order, then a footer line. "
                             "See docs/agents.md.")
    return schema


class Writer:
    """Appends lines to a transcript file, flushed one by one, so a crash leaves a valid prefix."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("a", encoding="utf-8")

    def write(self, line: Header | Event | Footer) -> None:
        self._fh.write(line.model_dump_json(exclude_none=True) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()
