"""The LLM judge (AGENTS.md, Judge): a design score and an implementation score, 0-100.

The rubric is built from the task's guidance files: every bullet (or, failing bullets, every
paragraph) of L1, L2 and L3 becomes an item the judge rates 0-100 with a line of evidence. The
judge must answer in a strict JSON shape, validated here and retried with the validation error
when malformed. Scores are computed here from the item ratings (mean per level, mean of levels
overall), never taken from the model's own arithmetic, and stored with the judge model, the prompt
version and the raw answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.providers.base import Provider
from agents.transcript import Event
from tasks.registry import Task

PROMPT_VERSION = "judge-v2"  # v2: every paragraph and list item of the guidance, none cut (v1 cut items at 700 characters and dropped prose beside lists)
LEVELS = ("L1", "L2", "L3")
MAX_ATTEMPTS = 3
MAX_ITEM_CHARS = 700  # a longer paragraph is split between sentences into items of about this size
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")


@dataclass(frozen=True)
class RubricItem:
    id: str  # "L2.3"
    level: str
    text: str


def _blocks(markdown: str) -> list[str]:
    """The guidance's design statements in order: each top-level list item (its nested lines
    joined in) and each paragraph outside lists, whitespace-normalized; headings are left out."""
    out: list[str] = []
    depth, item, heading = 0, None, False
    for tok in MarkdownIt().parse(markdown):
        if tok.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif tok.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
        elif tok.type == "list_item_open" and depth == 1:
            item = []
        elif tok.type == "list_item_close" and depth == 1 and item is not None:
            out.append(" ".join(item))
            item = None
        elif tok.type in ("heading_open", "heading_close"):
            heading = tok.type == "heading_open"
        elif tok.type == "inline" and not heading:
            text = " ".join(tok.content.split())
            if item is not None:
                item.append(text)
            elif text:
                out.append(text)
    return [b for b in out if b]


def _split_long(text: str) -> list[str]:
    """A paragraph longer than ``MAX_ITEM_CHARS`` as consecutive sentence groups, each at most
    that long where the sentences allow: every word stays in some item, none is cut."""
    if len(text) <= MAX_ITEM_CHARS:
        return [text]
    parts: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        if parts and len(parts[-1]) + 1 + len(sentence) <= MAX_ITEM_CHARS:
            parts[-1] += " " + sentence
        else:
            parts.append(sentence)
    return parts


def build_rubric(task: Task) -> list[RubricItem]:
    """Rubric items from the guidance files, in order, ids ``L<level>.<n>``: every list item and
    every paragraph of a level (a long paragraph split between sentences), none cut or dropped."""
    items: list[RubricItem] = []
    for level, text in task.guidance.items():
        if level not in LEVELS:
            continue
        statements = [part for block in _blocks(text) for part in _split_long(block)]
        for n, statement in enumerate(statements, start=1):
            items.append(RubricItem(f"{level}.{n}", level, statement))
    return items


class _ItemAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    score: int = Field(ge=0, le=100)
    evidence: str = Field(max_length=2000)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[_ItemAnswer]
    summary: str = Field("", max_length=4000)


@dataclass
class JudgeResult:
    kind: str  # "design" | "implementation"
    score: float  # 0-100
    levels: dict[str, float]
    items: list[dict[str, object]]
    judge_model: str
    prompt_version: str = PROMPT_VERSION
    raw_answers: list[str] = field(default_factory=list)  # every attempt, the accepted one last
    attempts: int = 1


SYSTEM = """You are a strict reviewer of GPU kernel designs. You compare a submission with an expert's design,
item by item, and rate how fully the submission realizes each item: 100 = clearly and correctly
realized, 50 = partly or ambiguously, 0 = absent or contradicted. Judge only what the submission
shows, never what it might do. Answer with one JSON object and nothing else."""


def _prompt(task: Task, rubric: list[RubricItem], kind: str, submission: str) -> str:
    what = ("design document" if kind == "design" else "kernel source code")
    items = "\n".join(f"- {it.id}: {it.text}" for it in rubric)
    return (
        f"Task {task.spec.id} `{task.slug}`: {task.spec.title}.\n\n"
        f"Expert design items to check the {what} against:\n{items}\n\n"
        f"The submitted {what}:\n<submission>\n{submission}\n</submission>\n\n"
        'Answer exactly: {"items": [{"id": "<item id>", "score": <0-100>, "evidence": "<one sentence>"}, ...], '
        '"summary": "<two sentences>"} with one entry for every item id above, in order.'
    )


def _parse(text: str, rubric: list[RubricItem]) -> _Answer:
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    answer = _Answer.model_validate(json.loads(body))
    ids = [it.id for it in answer.items]
    want = [it.id for it in rubric]
    if sorted(ids) != sorted(want):
        missing, extra = sorted(set(want) - set(ids)), sorted(set(ids) - set(want))
        raise ValueError(f"item ids do not match the rubric: missing {missing}, unexpected {extra}, "
                         f"duplicates {len(ids) - len(set(ids))}")
    return answer


def judge(provider: Provider, task: Task, submission: str, kind: str) -> JudgeResult:
    """Judge a design document (``kind="design"``) or a kernel (``"implementation"``) against the rubric.

    Raises ValueError when the judge gives no valid answer in :data:`MAX_ATTEMPTS` attempts: an
    unusable judgement is an error, never a score.
    """
    if kind not in ("design", "implementation"):
        raise ValueError("kind is design or implementation")
    rubric = build_rubric(task)
    if not rubric:
        raise ValueError(f"{task.slug}: the guidance yields no rubric items")
    history = [Event(turn=0, role="user", content=_prompt(task, rubric, kind, submission))]
    raws: list[str] = []
    for attempt in range(1, MAX_ATTEMPTS + 1):
        reply = provider.complete(SYSTEM, history, [])
        raws.append(reply.content)
        try:
            answer = _parse(reply.content, rubric)
        except (json.JSONDecodeError, ValidationError, ValueError) as exc:
            history += [Event(turn=attempt, role="assistant", content=reply.content),
                        Event(turn=attempt, role="user",
                              content=f"That answer is not valid: {str(exc)[:1500]}. Answer again with only the JSON object.")]
            continue
        by_id = {a.id: a for a in answer.items}
        levels = {}
        for level in LEVELS:
            scores = [by_id[it.id].score for it in rubric if it.level == level]
            if scores:
                levels[level] = sum(scores) / len(scores)
        overall = sum(levels.values()) / len(levels)
        return JudgeResult(kind=kind, score=round(overall, 2), levels={k: round(v, 2) for k, v in levels.items()},
                           items=[{"id": it.id, "level": it.level, "item": it.text, "score": by_id[it.id].score,
                                   "evidence": by_id[it.id].evidence} for it in rubric],
                           judge_model=provider.config.model, raw_answers=raws, attempts=attempt)
    raise ValueError(f"the judge gave no valid answer in {MAX_ATTEMPTS} attempts; last: {raws[-1][:500]!r}")
