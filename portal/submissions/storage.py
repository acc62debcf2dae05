"""Content-addressed blobs through Django's storage API (local disk by default, any backend works).

A blob's name is derived from its sha256 (``bundles/ab/abcdef....zip``), so the same bytes are
stored once and a name always means the same content. :class:`BlobWriter` remembers which blobs
it created, so a submission that fails after storing them removes them again: a refused or
rolled-back upload leaves no file behind.
"""

from __future__ import annotations

import hashlib
from types import TracebackType

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage


def blob_name(prefix: str, sha256: str, ext: str) -> str:
    return f"{prefix}/{sha256[:2]}/{sha256}.{ext}"


def blob_read(name: str) -> bytes:
    with default_storage.open(name, "rb") as fh:
        return fh.read()


class BlobWriter:
    """``with BlobWriter() as w: w.put(...)``; on an exception the blobs it created are deleted."""

    def __init__(self) -> None:
        self.created: list[str] = []

    def put(self, prefix: str, data: bytes, ext: str) -> tuple[str, str]:
        """Store ``data`` under its hash; returns (name, sha256). Existing content is reused."""
        sha = hashlib.sha256(data).hexdigest()
        name = blob_name(prefix, sha, ext)
        if not default_storage.exists(name):
            saved = default_storage.save(name, ContentFile(data))
            if saved != name:  # a concurrent writer won the race; keep theirs, drop ours
                default_storage.delete(saved)
            else:
                self.created.append(name)
        return name, sha

    def discard(self) -> None:
        for name in self.created:
            default_storage.delete(name)
        self.created.clear()

    def __enter__(self) -> BlobWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None:
            self.discard()
