"""``check_bundle``: every PORTAL.md validation rule, run before anything is stored or queued.

Input is the uploaded bytes; output is a :class:`ValidatedBundle` holding everything the
submission rows need, or :class:`BundleInvalid` listing every problem (file, rule, message).
Nothing here touches the database or the storage, so a refused upload leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass, field

from django.conf import settings

from evaluator.bundle_archive import Limits, read_archive
from evaluator.bundle_problems import BundleInvalid, Problem
from evaluator.manifest import MANIFEST_NAME, Manifest, parse_manifest
from portal.submissions.judging import judge_configured
from portal.submissions.kernels import check_kernel
from portal.submissions.transcripts import check_transcript, convert_log


@dataclass(frozen=True)
class KnownTask:
    """What validation needs to know about a task of the catalogue."""

    slug: str
    forbidden_python: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ValidatedTask:
    slug: str
    kernel_path: str = ""
    kernel_source: str = ""
    design_path: str = ""
    design_source: str = ""
    transcript_path: str = ""
    transcript: bytes = b""
    turns_used: int | None = None
    guidance_sha256: str = ""


@dataclass(frozen=True)
class ValidatedBundle:
    blob: bytes
    sha256: str
    kind: str
    manifest: Manifest
    hardware: str
    tasks: list[ValidatedTask]


def limits_from_settings() -> Limits:
    return Limits(max_upload=settings.D2K_UPLOAD_MAX_BYTES, max_uncompressed=settings.D2K_BUNDLE_MAX_UNCOMPRESSED,
                  max_members=settings.D2K_BUNDLE_MAX_MEMBERS, max_ratio=settings.D2K_BUNDLE_MAX_RATIO)


def _manifest_location_problem(files: dict[str, bytes]) -> Problem:
    nested = sorted(p for p in files if p.endswith("/" + MANIFEST_NAME))
    hint = f" (found {nested[0]}: archive the folder's contents, not the folder)" if nested else ""
    return Problem(MANIFEST_NAME, "manifest-missing", f"not found at the bundle's root{hint}")


def _check_task(entry, manifest: Manifest, files: dict[str, bytes], known: KnownTask,
                problems: list[Problem]) -> ValidatedTask | None:
    slug = entry.slug
    found: dict[str, object] = {"slug": slug}
    if manifest.mode == "kernel":
        path = entry.kernel_file()
        if path not in files:
            problems.append(Problem(path, "missing-file", f"the kernel of task {slug} is not in the bundle"))
            return None
        source, kernel_problems = check_kernel(path, files[path], max_bytes=settings.D2K_KERNEL_MAX_BYTES,
                                               forbidden=known.forbidden_python)
        problems.extend(kernel_problems)
        found.update(kernel_path=path, kernel_source=source)
    else:
        path = entry.design_file()
        data = files.get(path)
        if data is None:
            problems.append(Problem(path, "missing-file", f"the design document of task {slug} is not in the bundle"))
            return None
        if len(data) > settings.D2K_DESIGN_MAX_BYTES:
            problems.append(Problem(path, "design-size", f"is larger than {settings.D2K_DESIGN_MAX_BYTES:,} bytes"))
            return None
        try:
            found.update(design_path=path, design_source=data.decode("utf-8"))
        except UnicodeDecodeError:
            problems.append(Problem(path, "encoding", "is not UTF-8"))
            return None
        if b"\0" in data:  # valid UTF-8, but no text column (nor page) holds a NUL
            problems.append(Problem(path, "encoding", "contains NUL characters: not a text document"))
            return None
    transcript_path = entry.transcript_file(files)
    turns = entry.turns_used
    digest = entry.guidance_sha256 or ""
    if transcript_path:
        if transcript_path not in files:
            problems.append(Problem(transcript_path, "missing-file", f"the transcript of task {slug} is not in the bundle"))
            return None
        data = files[transcript_path]
        if entry.transcript_format != "d2k":  # another harness's log: converted, then checked like ours
            data, t_problem = convert_log(transcript_path, data, entry.transcript_format, manifest, slug, digest)
            if t_problem is not None:
                problems.append(t_problem)
                return None
        transcript, t_problems = check_transcript(transcript_path, data, slug=slug,
                                                  guidance=manifest.guidance, budget=manifest.budget, mode=manifest.mode)
        problems.extend(t_problems)
        if transcript is not None:
            if turns is not None and turns != transcript.turns_used:
                problems.append(Problem(MANIFEST_NAME, "turns-used",
                                        f"task {slug}: turns_used = {turns}, but its transcript uses "
                                        f"{transcript.turns_used}"))
            turns = transcript.turns_used
            stated = transcript.header.guidance_sha256
            if digest and stated and stated != digest:
                problems.append(Problem(MANIFEST_NAME, "guidance-digest",
                                        f"task {slug}: guidance_sha256 = {digest[:12]}..., but its transcript's "
                                        f"header says {stated[:12]}..."))
            digest = digest or stated
        found.update(transcript_path=transcript_path, transcript=data)  # stored in our format
    if turns is not None and turns > manifest.budget:
        problems.append(Problem(MANIFEST_NAME, "turns-used", f"task {slug}: {turns} turns exceed the budget "
                                                             f"of {manifest.budget}"))
    if digest and manifest.guidance == "none":
        problems.append(Problem(MANIFEST_NAME, "guidance-digest",
                                f"task {slug}: an unguided run (guidance = \"none\") was given no guidance text, "
                                f"so it has no guidance digest"))
    found["turns_used"] = turns
    found["guidance_sha256"] = digest
    return ValidatedTask(**found)  # type: ignore[arg-type]


def check_bundle(blob: bytes, filename: str, *, known_tasks: dict[str, KnownTask],
                 hardware: str | None = None) -> ValidatedBundle:
    """Validate an uploaded archive; ``hardware`` (a form or API field) overrides the manifest's."""
    archive = read_archive(blob, filename, limits_from_settings())
    files = archive.files
    if MANIFEST_NAME not in files:
        raise BundleInvalid([_manifest_location_problem(files)])
    manifest, problems = parse_manifest(files[MANIFEST_NAME])
    if manifest is None:
        raise BundleInvalid(problems)
    if manifest.mode == "design" and not judge_configured():
        raise BundleInvalid([Problem(MANIFEST_NAME, "design-mode",
                                     "mode: design-only submissions are judged by the LLM judge, which this site "
                                     "has not configured (D2K_JUDGE_PROVIDER, D2K_JUDGE_MODEL); submit kernels")])
    profile = hardware or manifest.hardware or settings.D2K_DEFAULT_HARDWARE
    if profile not in settings.D2K_HARDWARE_QUEUES:
        problems.append(Problem(MANIFEST_NAME, "unknown-hardware",
                                f"hardware: {profile!r} is not one of {', '.join(sorted(settings.D2K_HARDWARE_QUEUES))}"))
    tasks: list[ValidatedTask] = []
    seen: set[str] = set()
    for entry in manifest.entries():
        if entry.slug in seen:
            problems.append(Problem(MANIFEST_NAME, "duplicate-task", f"tasks: {entry.slug} is listed twice"))
            continue
        seen.add(entry.slug)
        known = known_tasks.get(entry.slug)
        if known is None:
            problems.append(Problem(MANIFEST_NAME, "unknown-task", f"tasks: no task {entry.slug!r} in the catalogue"))
            continue
        checked = _check_task(entry, manifest, files, known, problems)
        if checked is not None:
            tasks.append(checked)
    if problems:
        raise BundleInvalid(problems)
    return ValidatedBundle(blob=blob, sha256=hashlib.sha256(blob).hexdigest(), kind=archive.kind,
                           manifest=manifest, hardware=profile, tasks=tasks)


#: The fields a single kernel file needs in place of a manifest (the web form and the API).
SINGLE_KERNEL_REQUIRED = ("task", "model", "provider", "harness")


def is_single_kernel(filename: str) -> bool:
    """An upload named ``*.py`` is one kernel file with form fields; anything else is a bundle."""
    return filename.endswith(".py")


# Every field that only a single kernel file takes: beside a bundle, its manifest says these.
SINGLE_KERNEL_ONLY = (*SINGLE_KERNEL_REQUIRED, "model_version", "harness_version", "guidance", "budget",
                      "guidance_sha256")


def single_kernel_missing(fields: dict) -> list[str]:
    """The required single-kernel fields that ``fields`` leaves empty, in a fixed order."""
    return [name for name in SINGLE_KERNEL_REQUIRED if not fields.get(name)]


def single_kernel_fields_beside_bundle(fields: dict, defaults: dict) -> list[str]:
    """The single-kernel fields given beside a bundle, in a fixed order.

    A bundle's manifest states its task, model, harness, guidance and budget; a form or API field
    saying otherwise would be dropped without a word, so both the web form and the API refuse it.
    A field left at ``defaults`` (what the form pre-fills, or the API's default) is not "given":
    a browser posts the pre-filled harness and budget with every bundle."""
    return [name for name in SINGLE_KERNEL_ONLY
            if fields.get(name) not in (None, "") and fields.get(name) != defaults.get(name)]


def single_kernel_bundle(kernel: bytes, *, slug: str, model: str, provider: str, harness: str, guidance: str,
                         budget: int, model_version: str = "", harness_version: str = "",
                         transcript: bytes | None = None, turns_used: int | None = None,
                         guidance_sha256: str = "") -> bytes:
    """A one-task bundle built from a kernel file and form fields, so both uploads share one path.

    ``guidance_sha256`` (the digest of the guidance text the agent read) goes into the task's
    manifest entry as given, so the manifest's own rules judge it (its pattern, and rule
    ``guidance-digest``: none on an unguided run, agreement with a transcript's header)."""
    # ensure_ascii=False: JSON writes "🤖" as a surrogate pair ("\\ud83e\\udd16"), which TOML refuses.
    lines = [f"{key} = {json.dumps(value, ensure_ascii=False)}" for key, value in (
        ("model", model), ("provider", provider), ("model_version", model_version), ("harness", harness),
        ("harness_version", harness_version), ("guidance", guidance)) if value != ""]
    lines.append(f"budget = {int(budget)}")
    entry = f"{{ slug = {json.dumps(slug)}" + (f", turns_used = {int(turns_used)}" if turns_used is not None else "")
    if guidance_sha256:
        entry += f", guidance_sha256 = {json.dumps(guidance_sha256, ensure_ascii=False)}"
    lines.append(f"tasks = [{entry} }}]")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in ((MANIFEST_NAME, ("\n".join(lines) + "\n").encode()), (f"{slug}/kernel.py", kernel),
                           *([(f"{slug}/transcript.jsonl", transcript)] if transcript else [])):
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))  # fixed: same input, same sha256
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return buf.getvalue()
