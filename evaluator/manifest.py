"""The bundle manifest, ``submission.toml``: its pydantic model is the one definition.

``docs/manifest-schema.json`` is generated from :class:`Manifest` (``python manage.py
manifest_schema``) and a test keeps the two equal, so a team can validate a manifest offline with
any JSON Schema validator. Version 1 accepts what ``python -m agents run`` writes (a list of
slugs, files found by convention at ``<slug>/kernel.py``, ``<slug>/transcript.jsonl``,
``<slug>/design.md``) and the explicit form (a table per task naming its files).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Container
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evaluator.bundle_problems import Problem
from tasks.guidance import DIGEST_RE

#: The turn budget of a submission whose manifest names none: 350 turns, as in the paper.
DEFAULT_BUDGET = 350

MANIFEST_NAME = "submission.toml"
MANIFEST_VERSION = 1
#: Far more than 64 task tables with every field at its longest need; parsing more is wasted work.
MANIFEST_MAX_BYTES = 256 * 1024
_PATH = Field(min_length=1, max_length=200, pattern=r"^[^/\\][^\\]*$")
Slug = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9-]*$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*")
    @classmethod
    def _no_nul(cls, value: object) -> object:
        """TOML allows ``"\\u0000"``; a database text column (and every page) does not."""
        if isinstance(value, str) and "\0" in value:
            raise ValueError("NUL characters are not allowed")
        return value


class TaskEntry(_Strict):
    """One task of the bundle, with its files named explicitly (paths inside the bundle)."""

    slug: Slug
    kernel: Annotated[str, _PATH] | None = Field(None, description="default: <slug>/kernel.py")
    transcript: Annotated[str, _PATH] | None = Field(None, description="default: <slug>/transcript.jsonl if present")
    transcript_format: Literal["d2k", "openai-chat", "openai-responses", "anthropic"] = Field(
        "d2k", description="the transcript's format: ours (JSONL), or another harness's log as its API returned it "
                           "(one JSON document), converted on upload as `python -m agents import` does")
    design: Annotated[str, _PATH] | None = Field(None, description="design mode; default: <slug>/design.md")
    turns_used: int | None = Field(None, ge=0, le=100_000, description="default: from the transcript")
    guidance_sha256: str | None = Field(
        None, pattern=rf"^{DIGEST_RE}$",
        description="the digest of the guidance text the agent was given (tasks.guidance; the task page lists "
                    "each version's); default: from the transcript's header")

    # The conventional paths, defined once for the portal's validation, the engine's CLI and the
    # agent harness's bundle writer.
    def kernel_file(self) -> str:
        return self.kernel or f"{self.slug}/kernel.py"

    def design_file(self) -> str:
        return self.design or f"{self.slug}/design.md"

    def transcript_file(self, present: Container[str]) -> str:
        """The named transcript, else ``<slug>/transcript.jsonl`` if ``present`` holds it, else ""."""
        conventional = f"{self.slug}/transcript.jsonl"
        return self.transcript or (conventional if conventional in present else "")


class Manifest(_Strict):
    """``submission.toml`` at the bundle's root. Unknown keys are refused."""

    schema_version: Literal[1] = Field(MANIFEST_VERSION, description="the manifest format version")
    model: str = Field(min_length=1, max_length=120, description="the model's name, e.g. gpt-5")
    provider: str = Field(min_length=1, max_length=80, description="who serves the model, e.g. openai")
    model_version: str = Field("", max_length=80, description="a dated snapshot or release, if any")
    harness: str = Field(min_length=1, max_length=120, description="the agent harness, e.g. d2k-reference")
    harness_version: str = Field("", max_length=80)
    guidance: Literal["none", "L1", "L1+L2", "L1+L2+L3"]
    mode: Literal["kernel", "design"] = "kernel"
    budget: int = Field(DEFAULT_BUDGET, ge=1, le=100_000, description="turn budget per task")
    hardware: str | None = Field(None, max_length=32, description="target hardware profile (default: the site's)")
    notes: str = Field("", max_length=4000)
    tasks: list[Slug | TaskEntry] = Field(min_length=1, max_length=64)

    def entries(self) -> list[TaskEntry]:
        return [TaskEntry(slug=t) if isinstance(t, str) else t for t in self.tasks]


_RULES = {"extra_forbidden": "manifest-unknown-key", "missing": "manifest-missing-key"}


def parse_manifest(data: bytes) -> tuple[Manifest | None, list[Problem]]:
    """Parse and validate the manifest; every schema violation becomes a problem naming its key."""
    if len(data) > MANIFEST_MAX_BYTES:
        return None, [Problem(MANIFEST_NAME, "manifest-size", f"is {len(data):,} bytes; the limit is {MANIFEST_MAX_BYTES:,}")]
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        return None, [Problem(MANIFEST_NAME, "encoding", "is not UTF-8")]
    except tomllib.TOMLDecodeError as exc:
        return None, [Problem(MANIFEST_NAME, "manifest-syntax", f"is not valid TOML: {exc}")]
    except RecursionError:  # tomllib recurses once per nested array or inline table
        return None, [Problem(MANIFEST_NAME, "manifest-syntax", "is not valid TOML: arrays or tables nested too deeply")]
    try:
        return Manifest.model_validate(raw), []
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            if err["type"] == "string_type" and "constrained-str" in map(str, err["loc"]):
                continue  # a task given as a table: the other branch of the union reports it
            where = ".".join(str(p) for p in err["loc"] if str(p) not in ("constrained-str", "TaskEntry"))
            rule = _RULES.get(err["type"], "manifest-schema")
            message = "unknown key" if rule == "manifest-unknown-key" else err["msg"]
            problems.append(Problem(MANIFEST_NAME, rule, f"{where or 'manifest'}: {message}"))
        return None, _dedupe(problems)


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen: dict[str, Problem] = {}
    for p in problems:
        seen.setdefault(str(p), p)
    return list(seen.values())


def json_schema() -> dict[str, Any]:
    schema = Manifest.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://d2k-bench.invalid/schemas/manifest-v1.json"
    schema["title"] = f"D2K-Bench submission.toml, version {MANIFEST_VERSION}"
    return schema


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
