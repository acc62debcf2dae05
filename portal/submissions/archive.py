"""Read an uploaded ``.zip`` or ``.tar.gz`` into memory, refusing anything unsafe.

Nothing is extracted to disk: members are read into a dict, each read capped, so a lying header
or a decompression bomb stops at the limit instead of filling memory. Refused: absolute paths,
``..``, symlinks, hard links, device files and FIFOs (path traversal and friends), too many
members, too many uncompressed bytes, and a compression ratio beyond the limit (zip bombs).
"""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import BinaryIO

from portal.submissions.problems import BundleInvalid, Problem

ZIP_MAGIC = b"PK\x03\x04"
GZIP_MAGIC = b"\x1f\x8b"
#: Members smaller than this are not held to the per-member compression ratio (tiny text files
#: compress very well and are harmless; the total size cap still applies).
_RATIO_FLOOR = 64 * 1024


@dataclass(frozen=True)
class Limits:
    max_upload: int
    max_uncompressed: int
    max_members: int
    max_ratio: int


@dataclass
class Archive:
    kind: str  # "zip" or "tar.gz"
    files: dict[str, bytes] = field(default_factory=dict)


def detect_kind(head: bytes) -> str | None:
    if head.startswith(ZIP_MAGIC):
        return "zip"
    if head.startswith(GZIP_MAGIC):
        return "tar.gz"
    return None


def _path_problem(name: str) -> Problem | None:
    if not name or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return Problem(name or "(empty name)", "absolute-path", "absolute paths are not allowed in a bundle")
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if ".." in parts:
        return Problem(name, "path-traversal", "'..' is not allowed in a member's path")
    return None


class _Budget:
    """Counts members and bytes across the archive; raises as soon as a limit is passed."""

    def __init__(self, limits: Limits, archive_name: str):
        self.limits = limits
        self.name = archive_name
        self.members = 0
        self.bytes = 0

    def member(self) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise BundleInvalid([Problem(self.name, "member-count",
                                         f"more than {self.limits.max_members} members")])

    def read(self, name: str, stream: BinaryIO, declared: int) -> bytes:
        room = self.limits.max_uncompressed - self.bytes
        data = stream.read(min(declared, room) + 1)
        if len(data) > declared or len(data) > room:
            raise BundleInvalid([Problem(name, "uncompressed-size",
                                         f"the bundle unpacks to more than {self.limits.max_uncompressed:,} bytes "
                                         "(or a member is larger than its header says)")])
        self.bytes += len(data)
        return data


def _read_zip(blob: bytes, name: str, limits: Limits) -> Archive:
    try:
        zf = zipfile.ZipFile(io.BytesIO(blob))
        infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise BundleInvalid([Problem(name, "archive", f"is not a readable zip file: {exc}")]) from None
    budget = _Budget(limits, name)
    problems: list[Problem] = []
    declared = 0
    for info in infos:
        budget.member()
        problem = _path_problem(info.filename)
        mode = info.external_attr >> 16
        if problem is None and stat.S_ISLNK(mode):
            problem = Problem(info.filename, "symlink", "symbolic links are not allowed in a bundle")
        elif problem is None and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
            problem = Problem(info.filename, "special-file", "device files, FIFOs and sockets are not allowed")
        elif problem is None and info.file_size > _RATIO_FLOOR and \
                info.file_size > limits.max_ratio * max(info.compress_size, 1):
            problem = Problem(info.filename, "compression-ratio",
                              f"compresses more than {limits.max_ratio}:1 (a zip bomb?)")
        if problem:
            problems.append(problem)
        declared += info.file_size
    if declared > limits.max_uncompressed:
        problems.append(Problem(name, "uncompressed-size",
                                f"unpacks to {declared:,} bytes; the limit is {limits.max_uncompressed:,}"))
    if problems:
        raise BundleInvalid(problems)
    archive = Archive("zip")
    for info in infos:
        if info.is_dir():
            continue
        if info.filename in archive.files:
            raise BundleInvalid([Problem(info.filename, "duplicate-member", "appears twice in the archive")])
        try:
            with zf.open(info) as stream:
                archive.files[info.filename] = budget.read(info.filename, stream, info.file_size)
        except (zipfile.BadZipFile, OSError, NotImplementedError, RuntimeError) as exc:
            raise BundleInvalid([Problem(info.filename, "archive", f"cannot be read: {exc}")]) from None
    return archive


def _read_tar(blob: bytes, name: str, limits: Limits) -> Archive:
    archive = Archive("tar.gz")
    budget = _Budget(limits, name)
    problems: list[Problem] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r|gz") as tf:
            for member in tf:
                budget.member()
                problem = _path_problem(member.name)
                if problem is None and member.issym():
                    problem = Problem(member.name, "symlink", "symbolic links are not allowed in a bundle")
                elif problem is None and member.islnk():
                    problem = Problem(member.name, "hard-link", "hard links are not allowed in a bundle")
                elif problem is None and not (member.isfile() or member.isdir()):
                    problem = Problem(member.name, "special-file", "device files, FIFOs and sockets are not allowed")
                if problem:
                    problems.append(problem)
                    continue
                if member.isdir():
                    continue
                if member.name in archive.files:
                    problems.append(Problem(member.name, "duplicate-member", "appears twice in the archive"))
                    continue
                stream = tf.extractfile(member)
                assert stream is not None
                archive.files[member.name] = budget.read(member.name, stream, member.size)
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise BundleInvalid([Problem(name, "archive", f"is not a readable .tar.gz file: {exc}")]) from None
    if budget.bytes > _RATIO_FLOOR and budget.bytes > limits.max_ratio * max(len(blob), 1):
        problems.append(Problem(name, "compression-ratio", f"unpacks more than {limits.max_ratio}:1 (a bomb?)"))
    if problems:
        raise BundleInvalid(problems)
    return archive


def read_archive(blob: bytes, name: str, limits: Limits) -> Archive:
    """The members of ``blob`` (normalized paths, no directories); raises :class:`BundleInvalid`."""
    if len(blob) > limits.max_upload:
        raise BundleInvalid([Problem(name, "upload-size",
                                     f"is {len(blob):,} bytes; the limit is {limits.max_upload:,}")])
    kind = detect_kind(blob[:4])
    if kind is None:
        raise BundleInvalid([Problem(name, "archive", "is neither a .zip nor a .tar.gz archive")])
    archive = _read_zip(blob, name, limits) if kind == "zip" else _read_tar(blob, name, limits)
    archive.files = {PurePosixPath(k.replace("\\", "/")).as_posix().removeprefix("./"): v
                     for k, v in archive.files.items()}
    return archive
