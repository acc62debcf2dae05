"""The run folder as a submission bundle (docs/bundle-format.md): manifest, kernels or designs, transcripts.

``python -m agents run`` writes ``<out>/<slug>/kernel.py`` (or, in design mode,
``<out>/<slug>/design.md``) and ``<out>/<slug>/transcript.jsonl`` per task; this writes
``submission.toml`` beside them and zips exactly the files the manifest points the portal at, so
``--submit`` uploads what the run produced and nothing else from the folder.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

from evaluator.manifest import parse_manifest

MANIFEST = "submission.toml"
#: The file each task of a run must have produced to be listed, by mode (the portal's defaults).
PRODUCT = {"kernel": "kernel.py", "design": "design.md"}
TRANSCRIPT = "transcript.jsonl"


@dataclass(frozen=True)
class RunManifest:
    model: str
    provider: str
    guidance: str
    budget: int
    harness: str = "d2k-reference"
    harness_version: str = "1"
    mode: str = "kernel"
    hardware: str = ""

    def toml(self, tasks: list[str | dict[str, str]]) -> str:
        """The manifest; a task is a slug (files by convention) or a table naming its files."""
        lines = ["# written by python -m agents run", "schema_version = 1"]
        for key in ("model", "provider", "harness", "harness_version", "guidance", "mode"):
            lines.append(f"{key} = {json.dumps(getattr(self, key))}")
        lines.append(f"budget = {self.budget}")
        if self.hardware:
            lines.append(f"hardware = {json.dumps(self.hardware)}")
        lines.append(f"tasks = [{', '.join(_toml_value(t) for t in tasks)}]")
        return "\n".join(lines) + "\n"


def _toml_value(value: str | dict[str, str]) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    return "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items()) + "}"


def write_manifest(run_dir: Path, manifest: RunManifest) -> list[str]:
    """Write ``submission.toml`` for the tasks of the run that produced a kernel (a design document in
    design mode); returns their slugs. A design task's entry names its document and transcript."""
    product = PRODUCT[manifest.mode]
    done = sorted(p.parent.name for p in run_dir.glob(f"*/{product}"))
    tasks: list[str | dict[str, str]] = list(done)
    if manifest.mode == "design":
        tasks = []
        for slug in done:
            entry = {"slug": slug, "design": f"{slug}/{product}"}
            if (run_dir / slug / TRANSCRIPT).is_file():
                entry["transcript"] = f"{slug}/{TRANSCRIPT}"
            tasks.append(entry)
    (run_dir / MANIFEST).write_text(manifest.toml(tasks), encoding="utf-8")
    return done


class _InFolder:
    """The run folder as the set of files in it (``name in folder``), for the manifest's defaults."""

    def __init__(self, root: Path):
        self.root = root

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (self.root / name).is_file()


def bundle_files(run_dir: Path) -> list[str]:
    """The paths (inside the run folder) the manifest points at: each task's kernel or design
    document, and its transcript where there is one, read with the portal's own manifest model."""
    manifest = run_dir / MANIFEST
    if not manifest.is_file():
        raise FileNotFoundError(f"{manifest}: write the manifest first")
    parsed, problems = parse_manifest(manifest.read_bytes())
    if parsed is None or problems:
        raise ValueError(f"{manifest}: " + "; ".join(str(p) for p in problems))
    files = [MANIFEST]
    for entry in parsed.entries():
        main = entry.design_file() if parsed.mode == "design" else entry.kernel_file()
        for path in (main, entry.transcript or ""):
            if Path(path).is_absolute() or ".." in Path(path).parts:
                raise ValueError(f"{manifest}: task {entry.slug} names {path!r}, outside the run folder")
        if not (run_dir / main).is_file():
            raise FileNotFoundError(f"{run_dir / main}: the file of task {entry.slug} named by {manifest} is missing")
        files.append(main)
        transcript = entry.transcript_file(_InFolder(run_dir))
        if transcript and (run_dir / transcript).is_file():
            files.append(transcript)
    return sorted(set(files), key=lambda f: (f != MANIFEST, f))


def build_bundle(run_dir: Path, out: Path | None = None) -> Path:
    """Zip the manifest and the files it points at; deterministic (sorted, fixed times)."""
    files = bundle_files(run_dir)
    out = out or run_dir.with_suffix(".zip")
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, (run_dir / name).read_bytes())
    return out


def idempotency_key(bundle: Path) -> str:
    """The same bundle submitted twice (a retried upload) is one submission."""
    return "agents-" + hashlib.sha256(bundle.read_bytes()).hexdigest()[:40]
