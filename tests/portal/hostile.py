"""Hostile inputs for the portal's tests, and the proof that refusing them changed nothing.

The bombs are written byte by byte rather than with :mod:`zipfile`/:mod:`tarfile`: deflating
256 MiB of zeros takes seconds, while a deflate stream cut with full flushes can repeat one
compressed MiB as often as it likes (each flush resets the compressor, so every copy is the same
valid block). They are real archives all the same: the CRCs and sizes are right, and
``zipfile``/``tarfile`` would unpack them to the full size.

:func:`state` captures every row the portal owns (plus users and files): equal snapshots before
and after a request mean the request wrote nothing, audit rows included.
"""

from __future__ import annotations

import gzip
import io
import re
import stat
import struct
import tarfile
import time
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from html import unescape
from pathlib import Path

from django.apps import apps
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils.html import escape
from rest_framework.test import APIClient

from tests.portal.factories import expert_source, make_targz, media_files

MiB = 2**20
KERNEL = expert_source("silu-and-mul")
#: The apps whose rows a refused request must not touch (teams, tokens, submissions, audit, ...).
PORTAL_APPS = ("teams", "submissions", "moderation", "audit", "scores")
#: Written on purpose by a read: authentication records a token's use (at most once a minute).
VOLATILE = {"last_used_at", "last_login"}


# --- script injection --------------------------------------------------------------------------

def payload(tag: str) -> str:
    """Both classic injections, marked with ``tag`` so a page proves *which* field it showed."""
    return f"\"><img src=x onerror=alert('{tag}')><script>alert('{tag}')</script>"


#: What a payload looks like once it became markup (as text, "onerror=alert(" is harmless).
RAW_TAGS = ("<script>alert(", "<img src=x")


def assert_escaped(html: str, *shown: str, where: str = "") -> None:
    """No payload survives as markup; each field in ``shown`` is on the page, escaped."""
    for raw in RAW_TAGS:
        assert raw not in html, f"{where}: raw {raw!r} in the page"
    for tag in shown:
        assert escape(payload(tag)) in html, f"{where}: the {tag} field is not shown (escaped)"


# --- state ---------------------------------------------------------------------------------------

def state(media: Path, *extra_dirs: Path) -> dict[str, object]:
    """Every portal row (ordered, every column but :data:`VOLATILE`), users, and the files under
    ``media`` and ``extra_dirs`` (e.g. Django's temporary upload folder)."""
    snap: dict[str, object] = {}
    for label in PORTAL_APPS:
        for model in apps.get_app_config(label).get_models():
            rows = list(model.objects.order_by("pk").values())
            snap[model._meta.label] = [{k: v for k, v in row.items() if k not in VOLATILE} for row in rows]
    snap["users"] = list(User.objects.order_by("pk").values("pk", "username", "is_active"))
    snap["media"] = media_files(media)
    for folder in extra_dirs:
        snap[str(folder)] = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    return snap


# --- the two upload entry points ----------------------------------------------------------------

@dataclass(frozen=True)
class Refusal:
    status: int
    problems: list[tuple[str, str]]  # (file, rule)
    text: str  # every message, for "names the problem" checks


_ROW = re.compile(r"<tr><td><code>(.*?)</code></td><td><code>(.*?)</code></td><td>(.*?)</td></tr>", re.S)
_FORM_ERROR = re.compile(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', re.S)
_RULE_IN_MESSAGE = re.compile(r"^(.*?): .*\(rule: ([\w:-]+)\)$", re.S)


@dataclass
class Uploader:
    """Posts a bundle through the Submit form (``form``) or ``POST /api/v1/submissions/`` (``api``);
    :meth:`refuse` also proves that the refusal left every row and file (``watch``) as it was."""

    entry: str
    team: object
    client: Client
    watch: tuple[Path, ...] = field(default_factory=tuple)

    def post(self, blob: bytes, name: str = "b.zip", **fields: object):  # noqa: ANN201 - a test response
        upload = SimpleUploadedFile(name, blob)
        if self.entry == "form":
            data = {"team": self.team.pk, "upload": upload, "hardware": "cpu-interpret", "guidance": "none",
                    "budget": 350, **fields}
            return self.client.post("/submit/", data)
        return self.client.post("/api/v1/submissions/", {"bundle": upload, **fields}, format="multipart")

    def refuse(self, blob: bytes, name: str = "b.zip", **fields: object) -> Refusal:
        """Post, check that nothing changed, and parse the refusal: the API's error body (its one
        shape, docs/api.md), or the form page's problem table and form errors."""
        before = state(*self.watch)
        response = self.post(blob, name, **fields)
        assert state(*self.watch) == before, "a refused upload changed rows or left files"
        assert response.status_code in (400, 413), response.content[:500]
        if self.entry == "api":
            body = response.json()
            assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
            error = body["error"]
            assert error["code"] in ("invalid_bundle", "invalid"), error
            if isinstance(error["details"], dict):  # field errors: {field: [messages]}
                return Refusal(response.status_code, [], error["message"] + " " + str(error["details"]))
            return Refusal(response.status_code, [(d["file"], d["rule"]) for d in error["details"]],
                           error["message"] + " " + " ".join(d["message"] for d in error["details"]))
        html = response.content.decode()
        rows = [tuple(unescape(c) for c in row) for row in _ROW.findall(html)]
        problems = [(f, r) for f, r, _ in rows]
        messages = [m for _, _, m in rows]
        for block in _FORM_ERROR.findall(html):
            for item in re.findall(r"<li>(.*?)</li>", block, re.S):
                text = unescape(item)
                messages.append(text)
                match = _RULE_IN_MESSAGE.match(text)
                if match:
                    problems.append((match.group(1), match.group(2)))
        return Refusal(response.status_code, problems, " ".join(messages))


def team_uploader(entry: str, media: Path, settings, tmp_path: Path) -> Uploader:  # noqa: ANN001
    """Team Alpha's uploader; uploads over 2.5 MB spill to a watched temporary folder."""
    from portal.teams.services import token_create
    from tests.portal.factories import make_team

    spill = tmp_path / "upload-tmp"
    spill.mkdir(exist_ok=True)
    settings.FILE_UPLOAD_TEMP_DIR = str(spill)
    team, user = make_team("Alpha")
    return uploader(entry, team, user, token_create(team, name="ci", actor=user).secret, (media, spill))


def uploader(entry: str, team, user, token_secret: str, watch: tuple[Path, ...]) -> Uploader:  # noqa: ANN001
    """A signed-in browser (``form``) or a harness with the team's token (``api``)."""
    if entry == "form":
        client = Client(HTTP_HOST="localhost")
        client.force_login(user)
        return Uploader("form", team, client, watch)
    api = APIClient(HTTP_HOST="localhost")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_secret}")
    return Uploader("api", team, api, watch)


@contextmanager
def bounded() -> Iterator[Callable[[], tuple[float, float]]]:
    """Measures a block: ``(seconds, peak MiB allocated by Python)`` once it has run."""
    result = [0.0, 0.0]
    tracemalloc.start()
    start = time.perf_counter()
    try:
        yield lambda: (result[0], result[1])
    finally:
        result[0] = time.perf_counter() - start
        result[1] = tracemalloc.get_traced_memory()[1] / MiB
        tracemalloc.stop()


# --- small archives -------------------------------------------------------------------------------

def manifest(tasks: str = '["silu-and-mul"]', **fields: str) -> str:
    base = {"model": "m", "provider": "p", "harness": "h", "guidance": "none", "hardware": "cpu-interpret", **fields}
    return "".join(f'{k} = "{v}"\n' for k, v in base.items()) + f"tasks = {tasks}\n"


def base_files(**overrides: bytes | str) -> dict[str, bytes | str]:
    """A bundle the portal accepts; ``overrides`` replace or add members."""
    return {"submission.toml": manifest(), "silu-and-mul/kernel.py": KERNEL, **overrides}


def zip_with(files: dict[str, bytes | str], links: dict[str, str] | None = None) -> bytes:
    """A zip of ``files`` plus symbolic links (``name -> target``, Unix mode in the external attributes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.create_system, info.external_attr = 3, (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return buf.getvalue()


#: A tar.gz of files plus symbolic or hard links (one builder, shared with the upload tests).
targz_with = make_targz


# --- bombs ---------------------------------------------------------------------------------------

_ZERO_MIB = bytes(MiB)


@cache
def _zero_crc(mib: int, seed: int = 0) -> int:
    crc = seed
    for _ in range(mib):
        crc = zlib.crc32(_ZERO_MIB, crc)
    return crc


def _deflate_repeated(head: bytes, mib_of_zeros: int, tail: bytes) -> bytes:
    """Raw deflate of ``head + zeros + tail`` without compressing every zero."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(_ZERO_MIB) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(_ZERO_MIB) + c.flush(zlib.Z_FULL_FLUSH)
    assert block == again  # after a full flush the compressor starts afresh: the same bytes again
    return first + block * mib_of_zeros + c.compress(tail) + c.flush()


def _raw_zip(entries: list[tuple[str, bytes, int, int, int]], *, local_per_entry: bool = True) -> bytes:
    """``(name, stored data, method, crc, size)`` entries; ``local_per_entry=False`` writes one local
    header that every directory entry points at (a directory full of members costs nothing)."""
    out, central = io.BytesIO(), []
    for i, (name, data, method, crc, size) in enumerate(entries):
        raw_name = name.encode()
        offset = out.tell() if local_per_entry or i == 0 else 0
        if local_per_entry or i == 0:
            out.write(struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, len(data), size,
                                  len(raw_name), 0) + raw_name + data)
        central.append(struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc, len(data), size,
                                   len(raw_name), 0, 0, 0, 0, 0, offset) + raw_name)
    directory, at = b"".join(central), out.tell()
    count = min(len(entries), 0xFFFF)
    out.write(directory + struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, count, count, len(directory), at, 0))
    return out.getvalue()


def _plain_entries(files: dict[str, bytes | str]) -> list[tuple[str, bytes, int, int, int]]:
    rows = []
    for name, data in files.items():
        raw = data.encode() if isinstance(data, str) else data
        rows.append((name, raw, 0, zlib.crc32(raw), len(raw)))
    return rows


@cache
def zip_ratio_bomb(mib: int = 256) -> bytes:
    """A valid bundle plus ``zeros.bin``: ``mib`` MiB of zeros deflated about 1000:1."""
    deflated = _deflate_repeated(b"", mib, b"")
    return _raw_zip([*_plain_entries(base_files()), ("zeros.bin", deflated, 8, _zero_crc(mib), mib * MiB)])


@cache
def zip_member_bomb(members: int = 100_000) -> bytes:
    """A valid bundle plus ``members`` empty files (about 90 bytes each in the archive)."""
    empties = [(f"e/{i}", b"", 0, 0, 0) for i in range(members)]
    return _raw_zip([*_plain_entries(base_files()), *empties])


def _tar_header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info.tobuf(format=tarfile.GNU_FORMAT)


def _targz_zeros(header: bytes, mib: int, rest: bytes) -> bytes:
    """gzip(``header`` + ``mib`` MiB of zeros + ``rest``), one gzip member, correct CRC and size."""
    crc = zlib.crc32(rest, _zero_crc(mib, zlib.crc32(header)))
    size = len(header) + mib * MiB + len(rest)
    head = b"\x1f\x8b\x08\x00" + struct.pack("<I", 0) + b"\x02\xff"
    return head + _deflate_repeated(header, mib, rest) + struct.pack("<2I", crc, size & 0xFFFFFFFF)


def _tar_members(files: dict[str, bytes | str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name, data in files.items():
            raw = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tf.addfile(info, io.BytesIO(raw))
    return buf.getvalue()  # ends with the end-of-archive blocks


@cache
def targz_ratio_bomb(mib: int = 256) -> bytes:
    """A tar.gz whose first member ``zeros.bin`` is ``mib`` MiB of zeros, then a valid bundle."""
    return _targz_zeros(_tar_header("zeros.bin", mib * MiB), mib, _tar_members(base_files()))


@cache
def targz_long_name_bomb(mib: int = 256) -> bytes:
    """A GNU long-name header whose "name" is ``mib`` MiB long: tarfile reads a name whole, so no
    member size is ever seen before the bytes are unpacked."""
    return _targz_zeros(_tar_header("././@LongLink", mib * MiB, tarfile.GNUTYPE_LONGNAME), mib,
                        _tar_members(base_files()))


def gunzip_size(blob: bytes) -> int:
    """What a ``.tar.gz`` unpacks to (for the tests' own sanity checks on the builders)."""
    with gzip.GzipFile(fileobj=io.BytesIO(blob)) as gz:
        total = 0
        while chunk := gz.read(64 * MiB):
            total += len(chunk)
    return total


def stored_zip(files: dict[str, bytes | str]) -> bytes:
    """A zip with every member stored (no compression): quick to build at any size."""
    return _raw_zip(_plain_entries(files))


# --- states ----------------------------------------------------------------------------------------
def finish_evaluation(sub):  # noqa: ANN001, ANN201 (a Submission, returned reloaded)
    """Take a queued submission through a (hand-made, correct) evaluation to ``evaluated``."""
    from portal.submissions import actions
    from portal.submissions.models import Submission
    from tests.portal.test_state_machine import engine_result, run

    claim = actions.do_start_evaluation(sub.pk, 1, worker="w")
    attempt = sub.attempts.get()
    actions.do_record_task_result(attempt.pk, claim, engine_result())
    actions.do_finish_evaluation(attempt.pk, claim, run(engine_result()))
    return Submission.objects.get(pk=sub.pk)
