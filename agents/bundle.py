"""The run folder as a submission bundle (docs/bundle-format.md): manifest, kernels, transcripts.

``python -m agents run`` writes ``<out>/<slug>/kernel.py`` and ``<out>/<slug>/transcript.jsonl``
per task; this writes ``submission.toml`` beside them and zips exactly the files the portal
reads, so ``--submit`` uploads what the run produced and nothing else from the folder.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "submission.toml"


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

    def toml(self, tasks: list[str]) -> str:
        lines = ["# written by python -m agents run", "schema_version = 1"]
        for key in ("model", "provider", "harness", "harness_version", "guidance", "mode"):
            lines.append(f"{key} = {json.dumps(getattr(self, key))}")
        lines.append(f"budget = {self.budget}")
        if self.hardware:
            lines.append(f"hardware = {json.dumps(self.hardware)}")
        lines.append(f"tasks = [{', '.join(json.dumps(s) for s in tasks)}]")
        return "\n".join(lines) + "\n"


def write_manifest(run_dir: Path, manifest: RunManifest) -> list[str]:
    """Write ``submission.toml`` for the tasks of the run that produced a kernel; returns their slugs."""
    done = sorted(p.parent.name for p in run_dir.glob("*/kernel.py"))
    (run_dir / MANIFEST).write_text(manifest.toml(done), encoding="utf-8")
    return done


def build_bundle(run_dir: Path, out: Path | None = None) -> Path:
    """Zip the manifest and each task's kernel and transcript; deterministic (sorted, fixed times)."""
    manifest = run_dir / MANIFEST
    if not manifest.is_file():
        raise FileNotFoundError(f"{manifest}: write the manifest first")
    files = [manifest] + sorted(p for pattern in ("*/kernel.py", "*/transcript.jsonl") for p in run_dir.glob(pattern))
    out = out or run_dir.with_suffix(".zip")
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            info = zipfile.ZipInfo(str(path.relative_to(run_dir)), date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    return out


def idempotency_key(bundle: Path) -> str:
    """The same bundle submitted twice (a retried upload) is one submission."""
    return "agents-" + hashlib.sha256(bundle.read_bytes()).hexdigest()[:40]
