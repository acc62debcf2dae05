"""Builders for portal tests: users, teams, tokens, bundles and a small synced catalogue."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

from django.contrib.auth.models import User

from portal.moderation.permissions import moderators_group
from portal.teams.models import Team
from portal.teams.services import team_create
from tasks.registry import REPO_ROOT

#: The two tasks whose smoke workloads the interpreter runs fastest.
FAST_TASKS = ("silu-and-mul", "fused-add-rmsnorm")


def make_user(username: str, *, moderator: bool = False, password: str = "pw-for-tests-only") -> User:
    user = User.objects.create_user(username, password=password)
    if moderator:
        user.groups.add(moderators_group())
    return user


def make_team(name: str, *, owner: User | None = None, **quotas: int) -> tuple[Team, User]:
    owner = owner or make_user(f"{name.lower()}-owner")
    team = team_create(name, owner=owner)
    if quotas:
        Team.objects.filter(pk=team.pk).update(**quotas)
        team.refresh_from_db()
    return team, owner


def expert_source(slug: str) -> str:
    return (REPO_ROOT / "references" / slug / "expert.py").read_text(encoding="utf-8")


def manifest_text(tasks: list[str] | str, **fields: object) -> str:
    values: dict[str, object] = {"model": "test-model", "provider": "test-provider", "harness": "pytest",
                                 "guidance": "none", "hardware": "cpu-interpret", **fields}
    lines = [f"{k} = {json.dumps(v)}" for k, v in values.items() if v is not None]
    if isinstance(tasks, str):
        lines.append(tasks)
    else:
        lines.append(f"tasks = {json.dumps(tasks)}")
    return "\n".join(lines) + "\n"


def make_zip(files: dict[str, bytes | str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():  # a fixed date: the same files give the same bytes (and sha256)
            zf.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)),
                        data.encode() if isinstance(data, str) else data, zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def make_targz(files: dict[str, bytes | str], links: dict[str, tuple[bytes, str]] | None = None) -> bytes:
    """A tar.gz of ``files`` plus links: ``name -> (tarfile.SYMTYPE or LNKTYPE, target)``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in files.items():
            raw = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tf.addfile(info, io.BytesIO(raw))
        for name, (kind, target) in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, target
            tf.addfile(info)
    return buf.getvalue()


def expert_bundle(slugs: tuple[str, ...] = ("silu-and-mul",), **fields: object) -> bytes:
    files: dict[str, bytes | str] = {"submission.toml": manifest_text(list(slugs), **fields)}
    for slug in slugs:
        files[f"{slug}/kernel.py"] = expert_source(slug)
    return make_zip(files)


def media_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []
