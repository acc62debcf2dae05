"""Read an uploaded ``.zip`` or ``.tar.gz`` into memory, refusing anything unsafe.

Nothing is extracted to disk: members are read into a dict, each read capped, so a lying header
or a decompression bomb stops at the limit instead of filling memory. Refused: absolute paths,
``..``, symlinks, hard links, device files and FIFOs (path traversal and friends), too many
members, too many uncompressed bytes, and a compression ratio beyond the limit (zip bombs).
"""

from __future__ import annotations

import gzip
import io
import stat
import struct
import tarfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import BinaryIO

from evaluator.bundle_problems import BundleInvalid, Problem

ZIP_MAGIC = b"PK\x03\x04"
GZIP_MAGIC = b"\x1f\x8b"
#: Members smaller than this are not held to the per-member compression ratio (tiny text files
#: compress very well and are harmless; the total size cap still applies).
_RATIO_FLOOR = 64 * 1024
#: What a ``.tar.gz`` may unpack to besides its files' contents, per member: its header, padding,
#: a long-name or PAX header. Headers are data too: a 1 GiB GNU long name is a bomb of its own.
_TAR_OVERHEAD_PER_MEMBER = 2048


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


def _zip_directory_entries(blob: bytes, stop_after: int) -> int:
    """How many entries the central directory holds, counted up to ``stop_after`` + 1.

    :class:`zipfile.ZipFile` builds an object for every entry before we can count them, so a zip of
    300,000 empty members (26 MB) would cost seconds and hundreds of MB before the member-count
    rule; this walks the entries' fixed-size headers (as zipfile locates them) and stops early.
    Unreadable structures count as 0 here and are refused by zipfile itself.
    """
    at = len(blob) - 22  # the end record without a comment, else the last one (zipfile's order)
    if at < 0 or blob[at:at + 4] != b"PK\x05\x06" or blob[-2:] != b"\0\0":
        at = blob.rfind(b"PK\x05\x06", max(0, len(blob) - 22 - 0xFFFF))
    if at < 0 or at + 22 > len(blob):
        return 0
    size_cd, end = struct.unpack_from("<I", blob, at + 12)[0], at
    if at >= 76 and blob[at - 20:at - 16] == b"PK\x06\x07" and blob[at - 76:at - 72] == b"PK\x06\x06":
        end, size_cd = at - 76, struct.unpack_from("<Q", blob, at - 76 + 40)[0]  # zip64's end record
    pos, stop, count = end - size_cd, end, 0
    while pos >= 0 and pos + 46 <= stop and blob[pos:pos + 4] == b"PK\x01\x02" and count <= stop_after:
        n, m, k = struct.unpack_from("<3H", blob, pos + 28)
        pos, count = pos + 46 + n + m + k, count + 1
    return count


def _read_zip(blob: bytes, name: str, limits: Limits) -> Archive:
    if _zip_directory_entries(blob, limits.max_members) > limits.max_members:
        raise BundleInvalid([Problem(name, "member-count", f"more than {limits.max_members} members")])
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


class _Unpacked(Exception):
    """The decompressed stream passed its cap; ``rule`` says which limit set the cap."""

    def __init__(self, rule: str):
        self.rule = rule


class _CappedGzip:
    """A ``.tar.gz``'s decompressed stream that raises :class:`_Unpacked` once it passes ``cap``
    bytes, so no header, skipped member or lying size makes tarfile unpack more than that."""

    def __init__(self, blob: bytes, cap: int, rule: str):
        self._gz = gzip.GzipFile(fileobj=io.BytesIO(blob), mode="rb")
        self.cap, self.rule, self.total = cap, rule, 0

    def read(self, size: int = -1) -> bytes:
        want = self.cap + 1 - self.total if size is None or size < 0 else min(size, self.cap + 1 - self.total)
        data = self._gz.read(max(want, 1))
        self.total += len(data)
        if self.total > self.cap:
            raise _Unpacked(self.rule)
        return data


def _read_tar(blob: bytes, name: str, limits: Limits) -> Archive:
    archive = Archive("tar.gz")
    budget = _Budget(limits, name)
    problems: list[Problem] = []
    # Every member's data is unpacked to reach the next header, so sizes are charged as declared.
    ratio_cap = max(_RATIO_FLOOR, limits.max_ratio * len(blob))
    content_cap, rule = min((ratio_cap, "compression-ratio"), (limits.max_uncompressed, "uncompressed-size"))
    unpacked = _CappedGzip(blob, content_cap + (limits.max_members + 6) * _TAR_OVERHEAD_PER_MEMBER, rule)
    declared = 0
    try:
        with tarfile.open(fileobj=unpacked, mode="r|") as tf:
            for member in tf:
                budget.member()
                declared += member.size
                if declared > content_cap:
                    raise _Unpacked(rule)
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
    except _Unpacked as exc:
        message = (f"unpacks more than {limits.max_ratio}:1 (a bomb?)" if exc.rule == "compression-ratio" else
                   f"unpacks to more than {limits.max_uncompressed:,} bytes")
        raise BundleInvalid([Problem(name, exc.rule, message)]) from None
    except (tarfile.TarError, EOFError, OSError, ValueError, zlib.error) as exc:
        raise BundleInvalid([Problem(name, "archive", f"is not a readable .tar.gz file: {exc}")]) from None
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
    files: dict[str, bytes] = {}
    for member, data in archive.files.items():
        path = PurePosixPath(member.replace("\\", "/")).as_posix().removeprefix("./")
        if path in files:  # "a/b" and "./a//b" are one file once unpacked: which would win?
            raise BundleInvalid([Problem(member, "duplicate-member", f"is the same path as {path!r}")])
        files[path] = data
    archive.files = files
    return archive
