"""Which version of a task's guidance a run was given, and how it stands against today's.

One rule, for the submission pages, the moderators' review and the API: a run states the digest
of the guidance text its agent read (``SubmissionTask.guidance_sha256``), and the site says
whether that is the guidance the task gives now, an earlier version it published (with the
text still readable), or a text it never published (an agent run on another copy of the
guidance files, or a digest that is wrong).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from leaderboard.models import GuidanceVersion, Task
from portal.submissions.models import SubmissionTask
from tasks.guidance import CONDITIONS


@dataclass(frozen=True)
class GuidanceState:
    """How one run's guidance compares with what the site has published for the task."""

    status: str  # "unguided", "not stated", "current", "earlier" or "unpublished"
    sha256: str = ""
    version: GuidanceVersion | None = None

    @property
    def label(self) -> str:
        """A short phrase for a table cell."""
        short = self.sha256[:12]
        return {
            "unguided": "none (unguided)",
            "not stated": "version not stated",
            "current": f"{short}, current",
            "earlier": f"{short}, an earlier version",
            "unpublished": f"{short}, not a version this site published",
        }[self.status]


def guidance_state(task: Task, condition: str, sha256: str,
                   versions: dict[tuple[int, str, str], GuidanceVersion] | None = None) -> GuidanceState:
    """The state of a run on ``task`` under ``condition`` that says it read guidance ``sha256``.
    ``versions`` is :func:`published_versions`' map, for pages that look up many at once."""
    if not CONDITIONS.get(condition):
        return GuidanceState("unguided")
    if not sha256:
        return GuidanceState("not stated")
    current = sha256 == task.guidance_sha256(condition)
    if versions is not None:
        version = versions.get((task.pk, condition, sha256))
    elif current:  # no query: a caller without the map wants the status, not the row
        version = None
    else:
        version = GuidanceVersion.objects.filter(task=task, condition=condition, sha256=sha256).first()
    if current:
        return GuidanceState("current", sha256, version)
    return GuidanceState("earlier" if version is not None else "unpublished", sha256, version)


def published_versions(tasks: Iterable[Task]) -> dict[tuple[int, str, str], GuidanceVersion]:
    """Every kept version of ``tasks``' guidance, keyed by (task id, condition, digest), without
    their texts (pages link to a version; its own page reads the text): one query."""
    rows = GuidanceVersion.objects.filter(task__in=list(tasks)).defer("text")
    return {(v.task_id, v.condition, v.sha256): v for v in rows}


def states_of_runs(submission_ids: Iterable[int]) -> dict[int, dict[str, GuidanceState]]:
    """Submission id -> task slug -> the state of the guidance that run states, for pages that
    show many runs (the pairs): three queries however many runs, and no task row's other text."""
    rows = list(SubmissionTask.objects.filter(submission_id__in=list(submission_ids))
                .values_list("submission_id", "submission__guidance", "task_id", "guidance_sha256"))
    tasks = Task.objects.filter(pk__in={r[2] for r in rows}).only("slug", "guidance_l1", "guidance_l2", "guidance_l3")
    by_id = {t.pk: t for t in tasks}
    versions = published_versions(by_id.values())
    out: dict[int, dict[str, GuidanceState]] = {}
    for sub_id, condition, task_id, sha256 in rows:
        task = by_id[task_id]
        out.setdefault(sub_id, {})[task.slug] = guidance_state(task, condition, sha256, versions)
    return out


def versions_of(task: Task) -> list[tuple[GuidanceVersion, bool]]:
    """The task's kept versions, newest first per condition, each with whether it is current."""
    current = {c: task.guidance_sha256(c) for c, levels in CONDITIONS.items() if levels}
    return [(v, current.get(v.condition) == v.sha256)
            for v in task.guidance_versions.order_by("condition", "-first_synced_at")]
