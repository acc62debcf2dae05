"""The judge's strict-JSON contract and retries; guided and unguided prompts differ only in guidance."""

from __future__ import annotations

import json
import re

import pytest

from agents import prompt
from agents.judge import MAX_ATTEMPTS, PROMPT_VERSION, build_rubric, judge
from agents.providers import ProviderConfig, make_provider
from agents.tools import ToolBox
from tasks.guidance import CONDITIONS, guidance_digest
from tasks.registry import get_task, load_tasks
from tests.agents.fake_llm import FakeLLM, Reply

SLUG = "fused-add-rmsnorm"


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")


def _answer(ids: list[str], score: int) -> str:
    return json.dumps({"items": [{"id": i, "score": score, "evidence": "seen in the kernel"} for i in ids],
                       "summary": "fine"})


def test_rubric_covers_every_guidance_level() -> None:
    rubric = build_rubric(get_task(SLUG))
    assert {it.level for it in rubric} == {"L1", "L2", "L3"}
    assert len({it.id for it in rubric}) == len(rubric)


def test_rubric_keeps_every_statement_of_the_guidance_whole() -> None:
    """Prose beside a list is kept, nested list lines join their item, and a long paragraph is
    split between sentences, never cut: every word of every level reaches the judge."""
    from agents.judge import MAX_ITEM_CHARS
    from tasks.registry import load_tasks

    for task in load_tasks().tasks:
        rubric = build_rubric(task)
        for level, text in task.guidance.items():
            marker = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
            words = [w for line in text.splitlines() if not line.lstrip().startswith("#")
                     for w in marker.sub("", line).split()]
            got = " ".join(it.text for it in rubric if it.level == level).split()
            assert got == words, (task.slug, level)
        long = [it for it in rubric if len(it.text) > MAX_ITEM_CHARS]
        assert all(". " not in it.text[:-1] for it in long), (task.slug, long)  # only single long sentences
    mixed = get_task("moe-unpermute-combine")
    l3 = [it.text for it in build_rubric(mixed) if it.level == "L3"]
    assert l3[0].startswith("The kernel is latency-bound") and l3[-1].startswith("Mind the order")


def test_judge_retries_malformed_answers_then_scores_from_the_items() -> None:
    task = get_task(SLUG)
    ids = [it.id for it in build_rubric(task)]
    script = [Reply(text="I think it is good."),  # not JSON
              Reply(text=_answer(ids[:-1], 50)),  # an item missing
              Reply(text="```json\n" + _answer(ids, 80) + "\n```")]
    with FakeLLM(script) as llm:
        provider = make_provider(ProviderConfig(provider="anthropic", model="judge-1", base_url=llm.url))
        result = judge(provider, task, get_task(SLUG).expert_path.read_text(), "implementation")
    assert result.attempts == 3 and result.score == 80 and set(result.levels) == {"L1", "L2", "L3"}
    assert result.prompt_version == PROMPT_VERSION and result.judge_model == "judge-1"
    assert len(result.raw_answers) == 3
    # the validation error went back to the model
    retry_prompt = llm.requests[2][1]["messages"][-1]["content"]
    assert "missing" in retry_prompt and ids[-1] in retry_prompt


def test_judge_gives_up_rather_than_inventing_a_score() -> None:
    task = get_task(SLUG)
    with FakeLLM([Reply(text="no")] * MAX_ATTEMPTS) as llm:
        provider = make_provider(ProviderConfig(provider="anthropic", model="judge-1", base_url=llm.url))
        with pytest.raises(ValueError, match="no valid answer"):
            judge(provider, task, "a design", "design")


@pytest.mark.parametrize("slug", [t.slug for t in load_tasks().tasks])
@pytest.mark.parametrize("condition", ["L1", "L1+L2", "L1+L2+L3"])
def test_guided_prompt_is_the_unguided_prompt_plus_the_guidance_block(slug: str, condition: str) -> None:
    task = get_task(slug)
    plain, guided = prompt.build(task, "none"), prompt.build(task, condition)
    assert guided.system == plain.system
    start, end = guided.user.index(prompt.GUIDANCE_START), guided.user.index(prompt.GUIDANCE_END)
    block = guided.user[start:end + len(prompt.GUIDANCE_END) + 2]
    assert guided.user.replace(block, "", 1) == plain.user
    for level in prompt.GUIDANCE_LEVELS[condition]:
        assert task.guidance[level].strip() in block
    assert prompt.GUIDANCE_START not in plain.user
    tools = [t.name for t in ToolBox(task, workdir=None, condition="none").specs()]  # type: ignore[arg-type]
    assert tools == [t.name for t in ToolBox(task, workdir=None, condition=condition).specs()]  # type: ignore[arg-type]


def test_the_prompt_names_the_card_the_run_is_judged_on_and_the_in_place_contract() -> None:
    task = get_task("causal-conv1d")
    h100 = prompt.build(task, hardware="h100")
    assert "NVIDIA H100 (Hopper)" in h100.system and "timed on the NVIDIA H100" in h100.user
    assert "H200" not in h100.system + h100.user
    default = prompt.build(task)
    assert "NVIDIA H200 (Hopper)" in default.system and "timed on the NVIDIA H200" in default.user
    assert "conv_state: Tensor['N', 'D', 'W - 1'] (dtype, updated in place" in default.user
    design = prompt.build(task, mode="design", hardware="h100")
    assert "for an NVIDIA H100 (Hopper) should compute it" in design.system


@pytest.mark.parametrize("condition", ["L1", "L1+L2", "L1+L2+L3"])
def test_the_digest_covers_exactly_what_the_prompt_gives(condition: str) -> None:
    """Every level the digest hashes is in the guided prompt, and no other level is."""
    task = next(t for t in load_tasks().tasks if t.slug == "gated-delta-rule-chunked")
    text = prompt.build(task, condition).user
    for level in ("L1", "L2", "L3"):
        assert (task.guidance[level].strip() in text) == (level in CONDITIONS[condition])
    assert task.guidance_sha256(condition) == guidance_digest(task.guidance, condition)
