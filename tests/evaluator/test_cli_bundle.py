"""``python -m evaluator check <bundle>``: a team's bundle judged locally, task by task, through the
same archive reader and manifest model as an upload (ARCHITECTURE.md's CLI)."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tasks.registry import REPO_ROOT, get_task

pytestmark = pytest.mark.interpreter


def _zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluator", "check", *args, "--interpret", "--quiet"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)


def test_a_bundle_is_judged_task_by_task_and_recorded_by_its_sha256(tmp_path: Path) -> None:
    expert = get_task("silu-and-mul").expert_path.read_text()
    manifest = ('model = "m"\nprovider = "p"\nharness = "h"\nguidance = "none"\n'
                'tasks = [{ slug = "silu-and-mul", kernel = "k/mine.py" }]\n')
    bundle = _zip(tmp_path / "run.zip", {"submission.toml": manifest, "k/mine.py": expert})
    out = tmp_path / "r.json"
    proc = _cli(str(bundle), "--workload", "S1", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert [t["slug"] for t in result["tasks"]] == ["silu-and-mul"] and result["tasks"][0]["status"] == "correct"
    assert result["candidate"]["sha256"] == hashlib.sha256(bundle.read_bytes()).hexdigest()
    assert result["candidate"]["label"] == "run.zip"


@pytest.mark.parametrize(("files", "message"), [
    ({"k.py": "x = 1\n"}, "submission.toml: not found at the bundle's root"),
    ({"submission.toml": 'model = "m"\nprovider = "p"\nharness = "h"\nguidance = "none"\ntasks = ["silu-and-mul"]\n'},
     "silu-and-mul/kernel.py: the kernel of task silu-and-mul is not in the bundle"),
    ({"submission.toml": 'model = "m"\nprovider = "p"\nharness = "h"\nguidance = "none"\ntasks = ["no-such"]\n',
      "no-such/kernel.py": "x = 1\n"}, "the bundle names unknown task(s) no-such"),
    ({"submission.toml": 'model = "m"\nprovider = "p"\nharness = "h"\nguidance = "none"\nsurprise = 1\n'
                         'tasks = ["silu-and-mul"]\n'}, "manifest-unknown-key"),
])
def test_a_bad_bundle_is_refused_with_the_file_and_the_rule(tmp_path: Path, files: dict, message: str) -> None:
    proc = _cli(str(_zip(tmp_path / "b.zip", files)))
    assert proc.returncode != 0 and message in " ".join(proc.stderr.split()), proc.stderr  # the console wraps


def test_an_archive_that_escapes_its_folder_is_refused(tmp_path: Path) -> None:
    bundle = tmp_path / "b.tar.gz"
    with tarfile.open(bundle, "w:gz") as tf:
        data = b"x = 1\n"
        info = tarfile.TarInfo("../escape.py")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    proc = _cli(str(bundle))
    said = " ".join(proc.stderr.split())
    assert proc.returncode != 0 and "the bundle was refused" in said and "escape.py" in said, said
    assert not (tmp_path.parent / "escape.py").exists()
