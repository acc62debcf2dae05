"""Turn loaded registry tasks into the field values of ``Task`` and ``Workload`` rows.

Pure functions, no database: the sync service compares these values with what is stored and
writes only the differences, which is what makes a second sync a no-op. Values go through a
JSON round trip so that what we compare is exactly what a JSON column gives back.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tasks.registry import GUIDANCE_LEVELS
from tasks.registry import Task as RegistryTask
from tasks.spec import Workload as SpecWorkload


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True))


def task_files(task: RegistryTask) -> list[Path]:
    """Every file that defines a task, in a fixed order."""
    return [
        task.toml_path,
        task.baseline_path,
        task.expert_path,
        *(task.guidance_path(level) for level in GUIDANCE_LEVELS),
    ]


def task_content_sha256(task: RegistryTask) -> str:
    """sha256 over (relative path, file sha256) of every task file: changes when any file does."""
    digest = hashlib.sha256()
    for path in task_files(task):
        rel = path.relative_to(task.root).as_posix()
        digest.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\n")
    return digest.hexdigest()


def task_fields(task: RegistryTask) -> dict[str, Any]:
    """The synced columns of a ``Task`` row (not sync time, retirement or verification)."""
    spec = task.spec
    guidance = task.guidance
    return {
        "task_id": spec.id,
        "title": spec.title,
        "category": spec.category,
        "entry_point": spec.entry_point,
        "summary": spec.summary.strip(),
        "semantics": spec.semantics.strip(),
        "notes": spec.notes.strip(),
        "spec_json": _json(spec.model_dump(mode="json")),
        "guidance_l1": guidance["L1"],
        "guidance_l2": guidance["L2"],
        "guidance_l3": guidance["L3"],
        "content_sha256": task_content_sha256(task),
    }


def _shapes(task: RegistryTask, params: dict[str, Any]) -> list[dict[str, Any]]:
    tensors = [("input", arg) for arg in task.spec.inputs] + [("output", out) for out in task.spec.outputs]
    return [
        {
            "name": arg.name,
            "role": role,
            "shape": list(task.shape_of(arg.shape, params)),
            "dtype": task.dtype_of(arg.dtype, params),
        }
        for role, arg in tensors
    ]


def workload_fields(task: RegistryTask, workload: SpecWorkload, position: int) -> dict[str, Any]:
    """The columns of one ``Workload`` row, with FLOPs, bytes and shapes resolved."""
    params = dict(workload.params)
    flops, nbytes = task.roofline(params)
    return {
        "position": position,
        "model": workload.model,
        "note": workload.note,
        "params": _json(params),
        "flops": float(flops),
        "bytes": float(nbytes),
        "shapes": _json(_shapes(task, params)),
    }


def task_workloads(task: RegistryTask) -> dict[tuple[bool, str], dict[str, Any]]:
    """All workloads of a task keyed by (smoke, name)."""
    out: dict[tuple[bool, str], dict[str, Any]] = {}
    for smoke in (False, True):
        for position, workload in enumerate(task.workloads(smoke=smoke)):
            out[(smoke, workload.name)] = workload_fields(task, workload, position)
    return out
