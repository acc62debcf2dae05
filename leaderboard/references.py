"""Import engine results of the expert references, so a fresh install shows real reference rows.

``bench references --compare compile`` times three providers per workload in one run: the eager
baseline, torch.compile of it, and the expert kernel (as the run's candidate). This maps them to
the names the pages use (eager, compile, expert), stores one row per (workload, provider) and
keeps the whole RunResult for scoring. One transaction per file; a file already imported (same
sha256) is skipped; a file that does not validate or names unknown tasks writes nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction
from pydantic import ValidationError

from evaluator import suite_report
from evaluator.result import RunResult
from leaderboard.models import ReferenceRun, ReferenceTiming, Workload
from portal.scores.services import new_board_generation
from tasks.registry import load_tasks

#: engine provider name -> page name. "expert" in a references run is the second timing of the
#: same kernel (the spread), so it is not imported as a separate row.
PROVIDERS = {"baseline": "eager", "compile": "compile", "candidate": "expert"}


class ReferenceImportError(ValueError):
    """The file cannot be imported; the message says why. Nothing was written."""


@dataclass
class ImportReport:
    run: ReferenceRun | None
    created: bool
    timings: int = 0
    skipped: list[str] = field(default_factory=list)  # task/workload not in the database


def _parse(data: bytes, name: str) -> RunResult:
    try:
        result = RunResult.model_validate(json.loads(data))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReferenceImportError(f"{name}: not JSON: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ReferenceImportError(f"{name}: not an engine result: {'.'.join(map(str, first['loc']))}: "
                                   f"{first['msg']}") from None
    if result.command != "bench" or not result.timing_taken:
        raise ReferenceImportError(f"{name}: a {result.command} run without timing; import a GPU bench run")
    return result


def import_file(path: Path, provenance: str = "") -> ImportReport:
    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    existing = ReferenceRun.objects.filter(source_sha256=sha).first()
    if existing is not None:
        return ImportReport(existing, created=False)
    result = _parse(data, path.name)
    # A task's roofline may have been corrected since the run (T23's FLOP count): store SOL as the
    # engine computes it today, from the measured times (the stored JSON gets the same figures).
    suite_report.reroof(result, load_tasks(Path(settings.D2K_TASKS_ROOT)).tasks)
    workloads = {(w.task.slug, w.name): w for w in Workload.objects.filter(smoke=False).select_related("task")}
    report = ImportReport(None, created=True)
    with transaction.atomic():
        run = ReferenceRun.objects.create(
            hardware=result.hardware.name, source_sha256=sha, source_name=path.name,
            provenance=provenance or result.note, engine_version=result.engine_version,
            started_at=dt.datetime.fromisoformat(result.started_at), fingerprint=result.fingerprint.model_dump(),
            result_json=json.loads(result.model_dump_json()))
        rows = []
        for t in result.tasks:
            for w in t.workloads:
                target = workloads.get((t.slug, w.name))
                if target is None or w.smoke:
                    report.skipped.append(f"{t.slug}/{w.name}")
                    continue
                for engine_name, page_name in PROVIDERS.items():
                    tm = w.timings.get(engine_name)
                    if tm is None:
                        continue
                    rows.append(ReferenceTiming(
                        run=run, workload=target, provider=page_name, correct=w.correct, median_ms=tm.median_ms,
                        q1_ms=tm.q1_ms, q3_ms=tm.q3_ms, count=tm.count,
                        speedup=w.speedup.get(engine_name, 1.0 if engine_name == "baseline" else 0.0),
                        sol_fraction=w.sol_fraction.get(engine_name), peak_mem_bytes=tm.peak_mem_bytes))
        ReferenceTiming.objects.bulk_create(rows)
        report.run, report.timings = run, len(rows)
        transaction.on_commit(new_board_generation)  # the board's reference rows change
    return report
