"""The reference agent loop (AGENTS.md): one model, one task, a turn budget, the tools.

One turn is one model response. Transient provider errors are retried inside the provider and
cost no turn; a fatal one ends the run with ``provider-error``. A reply without a tool call ends
the run as ``done``, unless it was cut off at the output token limit or is empty: then the model
is told so in a user message (carrying that response's turn) and the run goes on. Every event is
appended to the transcript as it happens, so ``resume=True`` rebuilds the conversation from the
file and carries on from the last complete turn after a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agents import prompt as prompts
from agents.providers.base import Provider, ProviderError
from agents.tools import ToolBox
from agents.transcript import Event, Footer, Header, TranscriptError, Usage, Writer, load, now

#: The providers' stop reasons for a reply cut off by the output token limit (OpenAI ``length``,
#: Anthropic ``max_tokens``): such a reply is not the model saying it is done.
CUT_OFF_STOPS = frozenset({"length", "max_tokens"})
CUT_OFF_NOTE = ("[harness] Your previous reply was cut off at the output token limit (stop reason: {stop}). "
                "Continue from exactly where it stopped, without repeating what you already wrote.")
EMPTY_NOTE = ("[harness] Your previous reply was empty. Continue the task: call a tool, or give your final "
              "answer without a tool call when you are done.")


def unfinished_note(content: str, stop: str) -> str | None:
    """The message that sends a tool-less reply back to the model, or None if it ends the run (done)."""
    if stop in CUT_OFF_STOPS:
        return CUT_OFF_NOTE.format(stop=stop)
    if not content.strip():
        return EMPTY_NOTE
    return None


def final_text(history: list[Event]) -> str:
    """The model's final answer: its tool-less replies since its last tool call, joined, so that a
    design document cut off at the token limit and continued in the next reply is kept whole."""
    parts: list[str] = []
    for e in reversed(history):
        if e.role != "assistant":
            continue
        if e.tool_calls:
            break
        parts.append(e.content)
    return "".join(reversed(parts))


@dataclass
class RunSpec:
    provider_name: str
    model: str
    condition: str = "none"
    mode: str = "kernel"  # "kernel" | "design"
    budget: int = 350
    harness: str = "d2k-reference"
    #: USD per million input and output tokens (the provider's price for the model): when given,
    #: each turn's cost and the run's total are recorded in the transcript (AGENTS.md).
    price: tuple[float, float] | None = None
    hardware: str = ""  # the profile the run will be judged on; the prompt names its card


def turn_cost(usage: Usage, price: tuple[float, float] | None) -> float | None:
    """The cost of one response at ``price`` (USD per million input, output tokens)."""
    if price is None:
        return None
    return (usage.input_tokens * price[0] + usage.output_tokens * price[1]) / 1e6


@dataclass
class RunOutcome:
    footer: Footer
    transcript: Path
    kernel: Path | None
    design: Path | None


def _complete_prefix(events: list[Event]) -> list[Event]:
    """Drop a trailing turn whose tool results (or, for a reply without a tool call, the message
    that sent it back to the model) were not all written: the crash point."""
    while events:
        last_assistant = max((i for i, e in enumerate(events) if e.role == "assistant"), default=None)
        if last_assistant is None:
            return events
        if not events[last_assistant].tool_calls and last_assistant == len(events) - 1:
            events = events[:last_assistant]
            continue
        wanted = {c.id for c in events[last_assistant].tool_calls or []}
        got = {e.tool_call_id for e in events[last_assistant + 1:] if e.role == "tool"}
        if wanted <= got:
            return events
        events = events[:last_assistant]
    return events


def run_agent(provider: Provider, toolbox: ToolBox, spec: RunSpec, resume: bool = False) -> RunOutcome:
    """Run (or resume) the agent on ``toolbox.task``; the transcript is ``workdir/transcript.jsonl``."""
    task = toolbox.task
    workdir = toolbox.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "transcript.jsonl"
    p = prompts.build(task, spec.condition, spec.mode, spec.budget, spec.hardware)
    history: list[Event] = []
    if resume and path.exists():
        try:
            old = load(path, require_footer=False)
        except TranscriptError as exc:
            raise SystemExit(f"cannot resume {path}: {exc}") from None
        if old.footer is not None:
            return RunOutcome(old.footer, path, toolbox.kernel_path if toolbox.kernel_path.exists() else None,
                              workdir / "design.md" if (workdir / "design.md").exists() else None)
        history = _complete_prefix([e for e in old.events if e.role != "system"])
        path.write_text(old.model_copy(update={"events": [e for e in old.events if e.role == "system"] + history,
                                               "footer": None}).dumps(), encoding="utf-8")
        writer = Writer(path)
    else:
        path.unlink(missing_ok=True)
        writer = Writer(path)
        writer.write(Header(provider=spec.provider_name, model=spec.model, harness=spec.harness,
                            guidance=spec.condition, mode=spec.mode, budget=spec.budget, task=task.slug,
                            guidance_sha256=task.guidance_sha256(spec.condition), started_at=now()))
        writer.write(Event(turn=0, role="system", content=p.system, ts=now()))
        first = Event(turn=0, role="user", content=p.user, ts=now())
        writer.write(first)
        history = [first]

    turn = max((e.turn for e in history), default=0)
    tokens_in = sum(e.usage.input_tokens for e in history if e.usage)
    tokens_out = sum(e.usage.output_tokens for e in history if e.usage)
    stop, message, answer = "budget", "", ""
    tools = toolbox.specs()
    try:
        while turn < spec.budget:
            try:
                reply = provider.complete(p.system, history, tools)
            except ProviderError as exc:
                stop, message = "provider-error", str(exc)
                break
            turn += 1
            tokens_in += reply.usage.input_tokens
            tokens_out += reply.usage.output_tokens
            usage = reply.usage.model_copy(update={"cost_usd": turn_cost(reply.usage, spec.price)})
            event = Event(turn=turn, role="assistant", content=reply.content, tool_calls=reply.tool_calls or None,
                          usage=usage, ts=now())
            writer.write(event)
            history.append(event)
            if not reply.tool_calls:
                note = unfinished_note(reply.content, reply.stop)
                if note is None:
                    stop, answer = "done", final_text(history)
                    break
                if turn < spec.budget:  # cut off or empty: not done; tell the model and go on
                    nudge = Event(turn=turn, role="user", content=note, ts=now())
                    writer.write(nudge)
                    history.append(nudge)
                continue
            for call in reply.tool_calls:
                result = Event(turn=turn, role="tool", tool_call_id=call.id,
                               content=toolbox.call(call.name, call.arguments), ts=now())
                writer.write(result)
                history.append(result)
    except KeyboardInterrupt:
        stop, message = "interrupted", "interrupted by the user; resume with --resume"
    costs = [e.usage.cost_usd for e in history if e.role == "assistant" and e.usage]
    footer = Footer(stop_reason=stop, turns_used=turn, input_tokens=tokens_in, output_tokens=tokens_out,
                    cost_usd=sum(c for c in costs if c is not None) if spec.price is not None else None,
                    message=message)
    if stop != "interrupted":
        writer.write(footer)
    writer.close()
    design = None
    if spec.mode == "design" and answer:
        design = workdir / "design.md"
        design.write_text(answer, encoding="utf-8")
    kernel = toolbox.kernel_path if toolbox.kernel_path.exists() else None
    return RunOutcome(footer, path, kernel, design)
