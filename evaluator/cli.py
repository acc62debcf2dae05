"""``python -m evaluator``: list tasks, check a kernel, benchmark it, measure the ceilings.

Exit status: 0 when every task judged is correct, 1 when any is not, 2 for a usage error or a
task tree that does not validate.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from evaluator import bundle_local, errors, report
from evaluator.bundle_problems import BundleInvalid
from evaluator.result import REFERENCES_LABEL, ChildReport, RunResult, TaskResult
from evaluator.runner import RunOptions, run
from tasks.registry import REPO_ROOT, Task, TaskLoadError, load_tasks

COMPARE_CHOICES = ("compile", "expert", "self")


def _console() -> Console:
    return Console(stderr=True)


def _load(root: Path, only: list[str] | None = None) -> dict[str, Task]:
    """The valid task tree; with ``only`` (``--task``), problems in other tasks are warned about, not fatal.

    A whole-tree command must refuse a broken tree, but checking one task should not depend on
    an unrelated task someone is still writing.
    """
    rep = load_tasks(root)
    if rep.problems:
        if not only:
            raise TaskLoadError(rep.problems)
        mine = [p for p in rep.problems if any(f"/{slug}/" in f"/{p.file}" for slug in only)]
        if mine:
            raise TaskLoadError(mine)
        _console().print(f"[yellow]warning:[/yellow] {len(rep.problems)} problem(s) in other tasks of the tree "
                         "ignored (`python -m evaluator tasks` lists them)")
    return rep.by_slug()


def cmd_tasks(args: argparse.Namespace) -> int:
    tasks = _load(args.root)
    if args.json:
        print(json.dumps([{
            "id": t.spec.id, "slug": t.slug, "title": t.spec.title, "category": t.spec.category,
            "workloads": [{"name": w.name, "model": w.model, "params": w.params, "flops": t.roofline(w.params)[0],
                           "bytes": t.roofline(w.params)[1]} for w in t.workloads()],
            "smoke": [w.name for w in t.workloads(smoke=True)],
        } for t in tasks.values()], indent=2))
        return 0
    table = Table(title=f"{len(tasks)} tasks, {sum(len(t.spec.workloads) for t in tasks.values())} workloads")
    for col in ("id", "slug", "category", "workload", "model", "params", "GFLOP", "MB"):
        table.add_column(col)
    for t in tasks.values():
        for i, w in enumerate(t.workloads()):
            flops, nbytes = t.roofline(w.params)
            table.add_row(t.spec.id if i == 0 else "", t.slug if i == 0 else "", t.spec.category if i == 0 else "",
                          w.name, w.model, ", ".join(f"{k}={v}" for k, v in w.params.items()),
                          f"{flops / 1e9:,.2f}", f"{nbytes / 1e6:,.1f}")
    Console().print(table)
    return 0


def _select(args: argparse.Namespace, tasks: dict[str, Task]) -> list[Task]:
    if args.task:
        unknown = [s for s in args.task if s not in tasks]
        if unknown:
            raise SystemExit(f"error: unknown task(s) {', '.join(unknown)}; `python -m evaluator tasks` lists them")
        return [tasks[s] for s in args.task]
    if args.kernel and args.kernel != "references":
        raise SystemExit("error: name the task of a kernel file with --task")
    return list(tasks.values())


def timing_overrides(pairs: list[str]) -> dict[str, float]:
    """``--timing budget_s=1.5`` pairs as TimingConfig overrides, checked here so a typo fails at once
    (also the device scripts' parser: scripts/anticheat_device.py)."""
    from evaluator.timing_config import TimingConfig

    out: dict[str, float] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise SystemExit(f"error: --timing takes KEY=NUMBER, not {pair!r}") from None
        if not sep:
            raise SystemExit(f"error: --timing takes KEY=NUMBER, not {pair!r}")
    TimingConfig.from_dict(out)  # unknown keys raise EvaluatorError with their names
    return out


def _judge(args: argparse.Namespace, command: str) -> int:
    tasks = _load(args.root, args.task)
    unpacked = None  # a bundle's kernels, in a temporary folder that lives as long as the run
    if args.kernel != "references" and bundle_local.is_bundle(Path(args.kernel)):
        path = Path(args.kernel).resolve()
        if not path.is_file():
            raise SystemExit(f"error: no such bundle {args.kernel}")
        unpacked = tempfile.TemporaryDirectory(prefix="d2k-bundle-")
        try:
            kernels = bundle_local.unpack_kernels(path, Path(unpacked.name))
        except BundleInvalid as exc:
            raise SystemExit("error: the bundle was refused: " + "; ".join(str(p) for p in exc.problems)) from None
        unknown = [s for s in kernels if s not in tasks]
        if unknown:
            raise SystemExit(f"error: the bundle names unknown task(s) {', '.join(unknown)}")
        chosen = args.task or list(kernels)
        missing = [s for s in chosen if s not in kernels]
        if missing:
            raise SystemExit(f"error: the bundle has no kernel for {', '.join(missing)}")
        selected = [tasks[s] for s in chosen]

        def candidate_for(t: Task) -> Path:
            return kernels[t.slug]
        label, cand_path = path.name, path  # the result records the bundle's sha256
    elif args.kernel == "references":
        selected = _select(args, tasks)

        def candidate_for(t: Task) -> Path:
            return t.expert_path
        label, cand_path = REFERENCES_LABEL, None
    else:
        selected = _select(args, tasks)
        path = Path(args.kernel).resolve()
        if not path.is_file():
            raise SystemExit(f"error: no such kernel file {args.kernel}")

        def candidate_for(t: Task) -> Path:
            return path
        label, cand_path = path.name, path
    compare = [c for c in (getattr(args, "compare", None) or "").split(",") if c]
    bad = set(compare) - set(COMPARE_CHOICES)
    if bad:
        raise SystemExit(f"error: --compare takes {', '.join(COMPARE_CHOICES)}, not {', '.join(sorted(bad))}")
    opts = RunOptions(command=command, smoke=args.smoke, compare=compare, timeout_s=args.timeout,
                      workloads=args.workload or [], label=label,
                      interpret=True if args.interpret else None,
                      timing=timing_overrides(getattr(args, "timing", None) or []))
    console = _console()
    started = time.monotonic()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=args.quiet) as bar:
        overall = bar.add_task("tasks", total=len(selected))

        def on_progress(slug: str, rep: ChildReport) -> None:
            bar.update(overall, description=f"{slug} · {rep.workload} · {rep.phase}")
            if getattr(args, "trace", False):  # where the time goes, for logs of unattended runs
                print(f"[{time.monotonic() - started:7.1f} s] {slug} {rep.workload} {rep.phase}",
                      file=sys.stderr, flush=True)

        def on_done(res: TaskResult) -> None:
            bar.advance(overall)

        result = run(selected, candidate_for, opts, on_progress, on_done, candidate_path=cand_path)
    report.print_result(result, console)
    _write_outputs(args, result)
    return 0 if result.all_correct else 1


def _write_outputs(args: argparse.Namespace, result: RunResult) -> None:
    if args.json:
        text = result.model_dump_json(indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
    if getattr(args, "markdown", None):
        command = "python -m evaluator " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        Path(args.markdown).write_text(report.markdown(result, command), encoding="utf-8")


def cmd_suite(args: argparse.Namespace) -> int:
    """``bench references`` over the whole catalogue, with the results page as output."""
    ns = argparse.Namespace(**vars(args), kernel="references", task=None, workload=None, smoke=False,
                            interpret=False)
    if not ns.markdown:
        from evaluator.hardware import detect
        from evaluator.runner import gpu_present

        if not gpu_present():
            raise SystemExit("error: the suite measures speed and needs a GPU; use `check references` here")
        import torch

        ns.markdown = str(args.root / "docs" / "results" / f"{detect(torch.cuda.get_device_name()).name}.md")
    return _judge(ns, "bench")


def cmd_schema(args: argparse.Namespace) -> int:
    text = json.dumps(RunResult.model_json_schema(), indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        print(text, end="")
    return 0


def cmd_ceilings(args: argparse.Namespace) -> int:
    from evaluator.ceilings import measure

    text = json.dumps(measure(), indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    return 0


def _add_judge_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("kernel", help="a kernel .py file (with --task), a bundle (.zip/.tar.gz with submission.toml: "
                                  "every task it names, or those given with --task), or 'references' for every "
                                  "task's expert kernel")
    p.add_argument("--task", action="append", help="task slug (repeatable); default: all tasks")
    p.add_argument("--workload", action="append", help="only this workload (repeatable)")
    p.add_argument("--smoke", action="store_true", help="the small smoke workloads")
    p.add_argument("--interpret", action="store_true", help="force Triton's CPU interpreter")
    p.add_argument("--timeout", type=float, default=900.0, help="wall-clock seconds per task")
    p.add_argument("--json", metavar="PATH", help="write the versioned JSON result ('-' for stdout)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--trace", action="store_true", help="print every phase with its elapsed time to stderr")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evaluator", description=__doc__)
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("tasks", help="list tasks and workloads")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_tasks)
    p = sub.add_parser("check", help="correctness only")
    _add_judge_args(p)
    p.set_defaults(func=lambda a: _judge(a, "check"))
    p = sub.add_parser("bench", help="correctness, then timing against the baseline")
    _add_judge_args(p)
    p.add_argument("--compare", help="also time: compile (torch.compile of the baseline), expert, "
                                     "self (the candidate again, for the engine's run-to-run spread)")
    p.add_argument("--markdown", metavar="PATH", help="write a Markdown results page")
    p.add_argument("--timing", action="append", metavar="KEY=NUMBER",
                   help="override a timing setting (repeatable), e.g. budget_s=1.5 min_count=10")
    p.set_defaults(func=lambda a: _judge(a, "bench"))
    p = sub.add_parser("suite", help="bench every task's expert kernel; writes docs/results/<profile>.md")
    p.add_argument("--references", action="store_true", required=True,
                   help="judge the expert references (the only suite there is for now)")
    p.add_argument("--compare", default="compile,expert", help="as for bench (default: compile,expert)")
    p.add_argument("--timeout", type=float, default=900.0, help="wall-clock seconds per task")
    p.add_argument("--json", metavar="PATH", help="write the versioned JSON result")
    p.add_argument("--markdown", metavar="PATH", help="default: docs/results/<profile>.md")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_suite)
    p = sub.add_parser("schema", help="print the JSON Schema of the result")
    p.add_argument("--output", help="write it to this file")
    p.set_defaults(func=cmd_schema)
    p = sub.add_parser("ceilings", help="measure memory bandwidth and dense matmul rates on this GPU")
    p.add_argument("--output", help="also write them here (point $D2K_CEILINGS at it to use them for SOL)")
    p.set_defaults(func=cmd_ceilings)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except TaskLoadError as exc:
        _console().print("[red]the task tree does not validate:[/red]")
        for problem in exc.problems:
            _console().print(f"  {problem}")
        return 2
    except errors.EvaluatorError as exc:  # the sandbox is required and missing, a bad setting, ...
        _console().print(f"[red]error ({exc.code}):[/red] {exc}")
        return 2
    except SystemExit as exc:
        if isinstance(exc.code, str):
            _console().print(exc.code)
            return 2
        raise
