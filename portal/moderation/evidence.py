"""What a moderator sees before deciding (PORTAL.md, Moderation): findings, variance, outliers,
the hardware fingerprint, the transcript and the diff against the team's previous published
kernel for the same task. Reads only; scores come from :mod:`evaluator.score_result`.

Outliers compare the candidate's task speedup with the expert kernel's on the same profile, taken
from the imported reference runs, the same ones the board's expert row reads
(:func:`leaderboard.board_queries.expert_speedups`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, QuerySet

from leaderboard.board_queries import expert_speedups
from leaderboard.guidance_versions import GuidanceState, guidance_state, published_versions
from portal.submissions import selectors
from portal.submissions.constants import Status
from portal.submissions.highlight import highlight_diff
from portal.submissions.models import Submission
from portal.submissions.storage import blob_read
from portal.submissions.transcripts import TranscriptError, transcript_events

#: A task speedup this many times the expert's is flagged for a closer look.
OUTLIER_FACTOR = 1.5
#: Relative standard error of a timing above which the number is called noisy.
NOISY_REL_STDERR = 0.02
#: What an agent's tool call has no business mentioning (AGENTS.md: moderators look for reads
#: outside the task and for the expert kernel).
#: Matched in any case, in the arguments of every tool call (a written kernel's source included).
SUSPICIOUS_TOOL_TEXT = {"references/": "the expert references", "expert.py": "the expert kernel",
                        "../": "a path outside the task", "/etc/": "system files", "/proc/": "system files",
                        "http://": "the network", "https://": "the network", "socket": "the network",
                        "subprocess": "another process", "os.system": "another process", "ctypes": "native code",
                        "torch.cuda.stream": "a side stream", "dispatch_stack": "the op recorder",
                        "_disable_current_modes": "the op recorder", "evaluator.": "the harness",
                        "sys.modules": "the harness"}


def transcript_flags(storage_name: str, submission: Submission | None = None) -> list[str]:
    """Tool calls of a stored transcript that mention something suspicious, with their turn; and
    where its header names another model, provider or harness than the submission's manifest (a
    transcript from another run, or names spelled two ways: a moderator's call, not a refusal)."""
    try:
        transcript = transcript_events(blob_read(storage_name))
    except (OSError, TranscriptError):
        return ["the stored transcript cannot be read"]
    flags = []
    if submission is not None:
        header = transcript.header
        for what, said, filed in (("model", header.model, submission.model.name),
                                  ("provider", header.provider, submission.model.provider),
                                  ("harness", header.harness, submission.harness.name)):
            if said.casefold() != filed.casefold():
                flags.append(f"the transcript's header says {what} {said!r}; the manifest says {filed!r}")
    for event in transcript.events:
        for call in event.tool_calls or []:
            arguments = call.arguments.casefold()
            for needle, what in SUSPICIOUS_TOOL_TEXT.items():
                if needle in arguments:
                    flags.append(f"turn {event.turn}: tool call {call.name} mentions {needle!r} ({what})")
    return flags


@dataclass
class TaskEvidence:
    slug: str
    status: str
    verdict: str
    speedup: float | None
    expert_speedup: float | None
    findings: list[dict] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    noisy: list[str] = field(default_factory=list)
    aten_ops: list[str] = field(default_factory=list)
    diff_html: str = ""
    has_transcript: bool = False
    turns_used: int | None = None
    guidance: GuidanceState | None = None


def submission_evidence(sub: Submission) -> list[TaskEvidence]:
    results = {r.task.slug: r for r in selectors.attempt_results(sub.current_attempt)}
    experts = expert_speedups(sub.hardware)
    entries = list(sub.tasks.all())
    versions = published_versions(t.task for t in entries)
    out = []
    for task in entries:
        row = results.get(task.task.slug)
        ev = TaskEvidence(slug=task.task.slug, status=row.status if row else "not run",
                          verdict=row.verdict if row else "", speedup=None,
                          expert_speedup=experts.get(task.task.slug), has_transcript=bool(task.transcript_storage_name),
                          turns_used=task.turns_used,
                          guidance=guidance_state(task.task, sub.guidance, task.guidance_sha256, versions))
        if row is not None:
            score = selectors.task_score(row)
            ev.speedup = score.speedup
            ev.findings = row.findings
            ev.aten_ops = row.aten_ops
            for w in row.workloads.all():
                if w.sol_fraction is not None and w.sol_fraction > 1:
                    ev.flags.append(f"{w.name}: faster than speed-of-light ({w.sol_fraction:.2f} of SOL time)")
                if w.rel_stderr is not None and w.rel_stderr > NOISY_REL_STDERR:
                    ev.noisy.append(f"{w.name}: ±{w.rel_stderr:.1%}")
            if ev.speedup and ev.expert_speedup and ev.speedup > OUTLIER_FACTOR * ev.expert_speedup:
                ev.flags.append(f"speedup {ev.speedup:.2f}× is over {OUTLIER_FACTOR}× the expert's "
                                f"{ev.expert_speedup:.2f}×")
            if row.verdict in ("suspicious", "rejected-cheat"):  # a bug is the failed status, said already
                ev.flags.append(f"engine verdict: {row.verdict}")
        if task.transcript_storage_name:
            ev.flags.extend(transcript_flags(task.transcript_storage_name, sub))
        previous = selectors.previous_published_kernel(sub, task.task.slug)
        if previous is not None and task.kernel_source:
            ev.diff_html = highlight_diff(previous.kernel_source, task.kernel_source,
                                          f"#{previous.submission_id}/{previous.kernel_path}",
                                          f"#{sub.pk}/{task.kernel_path}")
        out.append(ev)
    return out


def moderation_queue() -> QuerySet[Submission]:
    """Evaluated submissions waiting for a decision, oldest first, with their task counts (one
    query for the page, not one per row)."""
    return (selectors.submissions_base().filter(status=Status.EVALUATED)
            .annotate(task_count=Count("tasks", distinct=True)).order_by("updated_at", "id"))


def attempt_variance(sub: Submission) -> dict[str, list[float]]:
    """Task speedups across this submission's evaluated attempts: run-to-run spread."""
    spread: dict[str, list[float]] = {}
    for attempt in sub.attempts.exclude(status__in=[Status.QUEUED, Status.RUNNING, Status.ERROR, Status.CANCELLED]):
        for row in selectors.attempt_results(attempt):
            score = selectors.task_score(row)
            if score.speedup:
                spread.setdefault(row.task.slug, []).append(round(score.speedup, 3))
    return {slug: values for slug, values in spread.items() if len(values) > 1}
