"""``python -m agents``: run the reference agent, import other harnesses' logs, judge, print schemas."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import ValidationError

from agents import importers, transcript
from agents.bundle import RunManifest, build_bundle, idempotency_key, write_manifest
from agents.loop import RunSpec, run_agent
from agents.prompt import GUIDANCE_LEVELS
from agents.providers import ProviderConfig, ProviderError, make_provider
from agents.tools import ToolBox
from evaluator.runner import gpu_present
from tasks.registry import get_task, load_tasks


def _provider_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--provider", choices=["openai", "anthropic"], required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--base-url", help="API base URL (default: the SDK's)")
    p.add_argument("--api-key-env", default="", help="environment variable with the key "
                   "(default OPENAI_API_KEY / ANTHROPIC_API_KEY)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    p.add_argument("--max-retries", type=int, default=6, help="retries of 429/5xx/connection errors")
    p.add_argument("--max-tokens", type=int, default=16384)


def _config(args: argparse.Namespace) -> ProviderConfig:
    return ProviderConfig(provider=args.provider, model=args.model, base_url=args.base_url,
                          api_key_env=args.api_key_env, timeout_s=args.timeout, max_retries=args.max_retries,
                          max_tokens=args.max_tokens)


def cmd_run(args: argparse.Namespace) -> int:
    slugs = [t.slug for t in load_tasks().tasks] if args.task == "all" else [args.task]
    try:
        provider = make_provider(_config(args))
    except ProviderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    interpret = not gpu_present()
    status = 0
    for slug in slugs:
        task = get_task(slug)
        box = ToolBox(task=task, workdir=args.out / slug, condition=args.guidance, interpret=interpret,
                      design_mode=args.mode == "design")
        spec = RunSpec(provider_name=args.provider, model=args.model, condition=args.guidance, mode=args.mode,
                       budget=args.turns, price=tuple(args.price) if args.price else None,
                       hardware=args.hardware or "")
        outcome = run_agent(provider, box, spec, resume=args.resume)
        f = outcome.footer
        print(f"{slug}: {f.stop_reason} after {f.turns_used} turn(s), {f.input_tokens:,} in / "
              f"{f.output_tokens:,} out tokens" + (f" (${f.cost_usd:.2f})" if f.cost_usd is not None else "")
              + f"; transcript {outcome.transcript}"
              + (f"; {f.message}" if f.message else ""))
        if f.stop_reason == "provider-error":
            status = 1
    done = write_manifest(args.out, RunManifest(model=args.model, provider=args.provider, guidance=args.guidance,
                                                budget=args.turns, mode=args.mode, hardware=args.hardware or ""))
    product = "a design document" if args.mode == "design" else "a kernel"
    print(f"run folder: {args.out}: {len(done)} of {len(slugs)} task(s) produced {product}")
    if args.submit:
        if not done:
            print(f"error: nothing to submit: no task produced {product}", file=sys.stderr)
            return 1
        return _submit(args) or status
    return status


def _submit(args: argparse.Namespace) -> int:
    """Upload the run through the portal's REST API (the team CLI's client)."""
    import os

    from d2k_cli.client import ApiError, Client

    url, token = args.portal or os.environ.get("D2K_URL", ""), os.environ.get(args.token_env, "")
    if not url or not token:
        print(f"error: --submit needs --portal (or D2K_URL) and a token in ${args.token_env}", file=sys.stderr)
        return 2
    bundle = build_bundle(args.out)
    try:
        code, body = Client(url, token).submit(bundle, hardware=args.hardware, idempotency_key=idempotency_key(bundle))
    except ApiError as exc:
        print(f"error: the portal refused {bundle}: {exc}", file=sys.stderr)
        return 1
    print(f"submitted {bundle} (HTTP {code}): submission {body.get('id')}, status {body.get('status')}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    try:
        header = transcript.Header(provider=args.provider, model=args.model, harness=args.harness,
                                   guidance=args.guidance, budget=args.budget, task=args.task,
                                   guidance_sha256=args.guidance_sha256)
    except ValidationError as exc:  # a flag's value the transcript format refuses (--budget 0, a bad digest)
        fields = "; ".join(f"--{'-'.join(map(str, e['loc'])).replace('_', '-')}: {e['msg']}" for e in exc.errors())
        print(f"error: {fields}", file=sys.stderr)
        return 2
    try:
        t = importers.import_log(args.log.read_bytes(), args.format, header)
    except (importers.ImportErrorBadLog, transcript.TranscriptError) as exc:
        print(f"error: {args.log}: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(t.dumps(), encoding="utf-8")
    print(f"{args.out}: {len(t.events)} events, {t.turns_used} turns")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        t = transcript.parse(args.path.read_bytes(), budget=args.budget)
    except transcript.TranscriptError as exc:
        print(f"error: {args.path}: {exc}", file=sys.stderr)
        return 2
    print(f"{args.path}: valid, {len(t.events)} events, {t.turns_used} turns, stop {t.footer.stop_reason}")
    return 0


def cmd_judge(args: argparse.Namespace) -> int:
    from agents.judge import judge

    provider = make_provider(_config(args))
    result = judge(provider, get_task(args.task), args.file.read_text(encoding="utf-8"), args.kind)
    print(json.dumps(result.__dict__, indent=2))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    text = json.dumps(transcript.json_schema(), indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m agents", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run the reference agent on a task (or all)")
    _provider_args(p)
    p.add_argument("--task", required=True, help="task slug, or 'all'")
    p.add_argument("--guidance", choices=list(GUIDANCE_LEVELS), default="none")
    p.add_argument("--mode", choices=["kernel", "design"], default="kernel")
    p.add_argument("--turns", type=int, default=350, help="turn budget per task")
    p.add_argument("--price", type=float, nargs=2, metavar=("IN", "OUT"),
                   help="USD per million input and output tokens (the provider's price for the model): "
                        "each turn's cost and the run's total go into the transcript")
    p.add_argument("--out", type=Path, required=True, help="run folder")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run from its transcripts")
    p.add_argument("--hardware", help="hardware profile to be judged on (default: the portal's)")
    p.add_argument("--submit", action="store_true", help="upload the run to the portal when it ends")
    p.add_argument("--portal", help="the portal's URL (default: $D2K_URL)")
    p.add_argument("--token-env", default="D2K_TOKEN", help="environment variable holding the team's API token")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("import", help="convert another harness's log into a transcript")
    p.add_argument("log", type=Path)
    p.add_argument("--format", choices=importers.FORMATS, required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--provider", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--harness", default="external")
    p.add_argument("--guidance", choices=list(GUIDANCE_LEVELS), default="none")
    p.add_argument("--budget", type=int, default=350)
    p.add_argument("--guidance-sha256", default="",
                   help="the digest of the guidance text the run was given (docs/bundle-format.md)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("validate", help="validate a transcript file")
    p.add_argument("path", type=Path)
    p.add_argument("--budget", type=int)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("judge", help="judge a design document or a kernel against the task's guidance")
    _provider_args(p)
    p.add_argument("--task", required=True)
    p.add_argument("--kind", choices=["design", "implementation"], required=True)
    p.add_argument("file", type=Path)
    p.set_defaults(func=cmd_judge)

    p = sub.add_parser("schema", help="print the JSON Schema of a transcript line")
    p.add_argument("--output")
    p.set_defaults(func=cmd_schema)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
