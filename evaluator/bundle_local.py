"""A bundle on the command line: ``python -m evaluator check|bench bundle.zip`` judges each task its
manifest names with that task's kernel file, as the portal's worker does with an upload.

The archive goes through the same reader as an upload (:mod:`evaluator.bundle_archive`: no path
traversal, links or bombs) and the same manifest model (:mod:`evaluator.manifest`), with limits
sized for a team's own machine rather than a public upload form.
"""

from __future__ import annotations

from pathlib import Path

from evaluator.bundle_archive import Limits, read_archive
from evaluator.bundle_problems import BundleInvalid, Problem
from evaluator.manifest import MANIFEST_NAME, parse_manifest

BUNDLE_SUFFIXES = (".zip", ".tar.gz", ".tgz")
#: A local run reads the team's own file: looser than the portal's upload limits, still bounded.
LOCAL_LIMITS = Limits(max_upload=1 << 30, max_uncompressed=4 << 30, max_members=10_000, max_ratio=1_000)


def is_bundle(path: Path) -> bool:
    return path.name.endswith(BUNDLE_SUFFIXES)


def unpack_kernels(bundle: Path, into: Path) -> dict[str, Path]:
    """slug -> the task's kernel file, written under ``into``, in the manifest's order.

    Raises :class:`BundleInvalid` naming every problem: no manifest, a manifest the schema
    refuses, a design-only bundle (nothing to run), or a kernel file the bundle lacks.
    """
    archive = read_archive(bundle.read_bytes(), bundle.name, LOCAL_LIMITS)
    if MANIFEST_NAME not in archive.files:
        raise BundleInvalid([Problem(MANIFEST_NAME, "manifest-missing", "not found at the bundle's root")])
    manifest, problems = parse_manifest(archive.files[MANIFEST_NAME])
    if manifest is None or problems:
        raise BundleInvalid(problems)
    if manifest.mode == "design":
        raise BundleInvalid([Problem(MANIFEST_NAME, "mode", "a design-only bundle has no kernels to run")])
    kernels: dict[str, Path] = {}
    for entry in manifest.entries():
        name = entry.kernel_file()
        if name not in archive.files:
            problems.append(Problem(name, "missing-file", f"the kernel of task {entry.slug} is not in the bundle"))
            continue
        dest = into / entry.slug / "kernel.py"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(archive.files[name])
        kernels[entry.slug] = dest
    if problems:
        raise BundleInvalid(problems)
    return kernels
