"""Hostile uploads through both real entry points, the Submit form and ``POST /api/v1/submissions/``:
oversized uploads, zip and tar bombs, path traversal and links. Each is refused with its status, a
message naming the file and the rule, and leaves no row, no audit entry and no file (media and
Django's temporary upload folder), which :meth:`tests.portal.hostile.Uploader.refuse` checks.

The rules themselves are tested one level down in ``test_uploads.py``; here the point is the HTTP
path (what reaches the validator, what the client sees) and the cost of refusing: a bomb must be
refused from its headers, not after unpacking it.
"""

from __future__ import annotations

import os
import tarfile

import pytest

from portal.submissions.models import Submission
from tests.portal import hostile as h

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["form", "api"])
def up(request, catalogue, media, settings, tmp_path) -> h.Uploader:
    return h.team_uploader(request.param, media, settings, tmp_path)


def test_the_clean_bundles_are_accepted(up):
    """The control: without their hostile member, the archives below are accepted by both doors."""
    for blob, name in ((h.zip_with(h.base_files()), "b.zip"), (h.targz_with(h.base_files()), "b.tar.gz")):
        response = up.post(blob, name)
        assert response.status_code in (201, 302), response.content[:300]
    assert Submission.objects.count() == 2


# --- 1. oversized ------------------------------------------------------------------------------

def test_an_upload_over_the_limit_is_refused_before_anything_is_stored(up, settings):
    limit = settings.D2K_UPLOAD_MAX_BYTES
    blob = h.stored_zip(h.base_files(**{"pad.bin": os.urandom(limit)}))  # incompressible, > the limit
    assert len(blob) > limit > 2_621_440  # so Django spills it to the temporary folder first
    refusal = up.refuse(blob)
    assert refusal.status == (413 if up.entry == "api" else 400)
    assert refusal.problems == [("b.zip", "upload-size")]
    assert f"{len(blob):,}" in refusal.text or "too large" in refusal.text


def test_the_upload_limit_is_exact(up, settings):
    blob = h.zip_with(h.base_files())
    settings.D2K_UPLOAD_MAX_BYTES = len(blob) - 1
    assert up.refuse(blob).problems == [("b.zip", "upload-size")]
    settings.D2K_UPLOAD_MAX_BYTES = len(blob)
    assert up.post(blob).status_code in (201, 302)


# --- 2. bombs ------------------------------------------------------------------------------------

BOMBS = {
    # name: (builder, upload name, the problem it must raise, what its message says)
    "zip-ratio": (h.zip_ratio_bomb, "b.zip", ("zeros.bin", "compression-ratio"), "compresses more than 100:1"),
    "zip-members": (h.zip_member_bomb, "b.zip", ("b.zip", "member-count"), "more than 400 members"),
    "targz-ratio": (h.targz_ratio_bomb, "b.tar.gz", ("b.tar.gz", "compression-ratio"), "unpacks more than 100:1"),
    "targz-long-name": (h.targz_long_name_bomb, "b.tar.gz", ("b.tar.gz", "compression-ratio"),
                        "unpacks more than 100:1"),
}


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_bombs_are_refused_without_unpacking_them(up, bomb, settings):
    build, name, problem, message = BOMBS[bomb]
    blob = build()
    up.refuse(b"PK\x03\x04 warm-up: imports and templates are not the bomb's cost")
    with h.bounded() as cost:
        refusal = up.refuse(blob, name)
    seconds, peak_mib = cost()
    assert refusal.status == 400 and problem in refusal.problems and message in refusal.text, refusal
    # Unpacking would allocate 256 MiB, or build 100,000 zipfile entries (~50 MiB more); refusing
    # costs a few copies of the upload (the client's body, Django's, the portal's) and, for a tar
    # stream, at most the documented ratio (a tar header's size is only known once it is unpacked).
    size = len(blob) / h.MiB
    allowed = 5 * size + 16 + (settings.D2K_BUNDLE_MAX_RATIO * size if name.endswith(".tar.gz") else 0)
    assert peak_mib < allowed, f"{bomb}: {peak_mib:.0f} MiB allocated, {allowed:.0f} allowed"
    assert seconds < 15, f"{bomb}: {seconds:.1f} s"


# --- 3. traversal and links ----------------------------------------------------------------------

KERNEL_PATH = "silu-and-mul/kernel.py"
NO_KERNEL = {"submission.toml": h.manifest()}

TRAVERSAL = {
    # name: (archive, its problems)
    "zip-dotdot": (lambda: h.zip_with(h.base_files(**{"../x.py": "x"})), [("../x.py", "path-traversal")]),
    "zip-nested-dotdot": (lambda: h.zip_with(h.base_files(**{"silu-and-mul/../../x.py": "x"})),
                          [("silu-and-mul/../../x.py", "path-traversal")]),
    "zip-backslash-dotdot": (lambda: h.zip_with(h.base_files(**{"..\\x.py": "x"})), [("..\\x.py", "path-traversal")]),
    "zip-absolute": (lambda: h.zip_with(h.base_files(**{"/tmp/x.py": "x"})), [("/tmp/x.py", "absolute-path")]),
    "zip-drive": (lambda: h.zip_with(h.base_files(**{"C:\\x.py": "x"})), [("C:\\x.py", "absolute-path")]),
    "zip-symlink-kernel": (lambda: h.zip_with(NO_KERNEL, links={KERNEL_PATH: "../../../etc/passwd"}),
                           [(KERNEL_PATH, "symlink")]),
    "zip-symlink-dir": (lambda: h.zip_with(h.base_files(), links={"up": ".."}), [("up", "symlink")]),
    "zip-same-path-twice": (lambda: h.zip_with(h.base_files(**{"./submission.toml": h.manifest(model="other")})),
                            [("./submission.toml", "duplicate-member")]),
    "targz-dotdot": (lambda: h.targz_with(h.base_files(**{"../x.py": "x"})), [("../x.py", "path-traversal")]),
    "targz-backslash-dotdot": (lambda: h.targz_with(h.base_files(**{"..\\x.py": "x"})),
                               [("..\\x.py", "path-traversal")]),
    "targz-absolute": (lambda: h.targz_with(h.base_files(**{"/etc/cron.d/x": "x"})),
                       [("/etc/cron.d/x", "absolute-path")]),
    "targz-symlink-kernel": (lambda: h.targz_with(NO_KERNEL, links={KERNEL_PATH: (tarfile.SYMTYPE, "/etc/passwd")}),
                             [(KERNEL_PATH, "symlink")]),
    "targz-hardlink-kernel": (lambda: h.targz_with(NO_KERNEL, links={KERNEL_PATH: (tarfile.LNKTYPE, "submission.toml")}),
                              [(KERNEL_PATH, "hard-link")]),
    "targz-hardlink-outside": (lambda: h.targz_with(h.base_files(), links={"x": (tarfile.LNKTYPE, "../../etc/passwd")}),
                               [("x", "hard-link")]),
    "targz-same-path-twice": (lambda: h.targz_with(h.base_files(**{"silu-and-mul//kernel.py": "x = 1\n"})),
                              [("silu-and-mul//kernel.py", "duplicate-member")]),
}


@pytest.mark.parametrize("case", list(TRAVERSAL))
def test_traversal_and_links_are_refused(up, case):
    build, problems = TRAVERSAL[case]
    refusal = up.refuse(build(), "b.tar.gz" if case.startswith("targz") else "b.zip")
    assert refusal.status == 400 and refusal.problems == problems, refusal
