"""Find, load and validate every task of the tree, reporting every problem at once.

A task is four places: ``tasks/<slug>/task.toml`` and ``baseline.py``,
``references/<slug>/expert.py`` and ``guidance/<slug>/L1.md|L2.md|L3.md``. The loader reads
them without importing any of their Python (it parses it), so the web process and CI can
validate the tree without torch or a GPU; the engine imports the code later in its child
process. Every problem is a :class:`Problem` naming the file and the field, and a load never
stops at the first one.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pydantic import ValidationError

from tasks import formula, python_ast
from tasks.guidance import guidance_digest
from tasks.spec import DTYPE_SIZES, TaskSpec, TensorArg, Workload

REPO_ROOT = Path(__file__).resolve().parent.parent
GUIDANCE_LEVELS = ("L1", "L2", "L3")
_MIN_GUIDANCE_CHARS = 200


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a task file."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{where}: {self.message}"


class TaskLoadError(Exception):
    """Raised by :func:`load_tasks` in strict mode; carries every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


@dataclass(frozen=True)
class Task:
    """A validated task and the paths of its files."""

    spec: TaskSpec
    root: Path

    @property
    def slug(self) -> str:
        return self.spec.slug

    @property
    def task_dir(self) -> Path:
        return self.root / "tasks" / self.slug

    @property
    def toml_path(self) -> Path:
        return self.task_dir / "task.toml"

    @property
    def baseline_path(self) -> Path:
        return self.task_dir / "baseline.py"

    @property
    def expert_path(self) -> Path:
        return self.root / "references" / self.slug / "expert.py"

    def guidance_path(self, level: str) -> Path:
        return self.root / "guidance" / self.slug / f"{level}.md"

    @cached_property
    def guidance(self) -> dict[str, str]:
        return {lvl: self.guidance_path(lvl).read_text(encoding="utf-8") for lvl in GUIDANCE_LEVELS}

    def guidance_sha256(self, condition: str) -> str:
        """The digest of the guidance ``condition`` gives in this tree ("" for none)."""
        return guidance_digest(self.guidance, condition)

    def workloads(self, smoke: bool = False) -> list[Workload]:
        return list(self.spec.smoke if smoke else self.spec.workloads)

    def workload(self, name: str, smoke: bool = False) -> Workload:
        for w in self.workloads(smoke):
            if w.name == name:
                return w
        raise KeyError(f"{self.slug} has no {'smoke ' if smoke else ''}workload {name!r}")

    # Resolution of the symbolic parts of the spec against one workload.
    def dtype_of(self, dtype: str, params: Mapping[str, object]) -> str:
        return resolve_dtype(dtype, params)

    def shape_of(self, arg_shape: list[int | str], params: Mapping[str, object]) -> tuple[int, ...]:
        return resolve_shape(arg_shape, params)

    def nbytes(self, params: Mapping[str, object]) -> dict[str, int]:
        """``nbytes_<name>`` for every tensor input and output of a workload."""
        out: dict[str, int] = {}
        for arg in [*self.spec.inputs, *self.spec.outputs]:
            n = 1
            for d in self.shape_of(arg.shape, params):
                n *= d
            out[f"nbytes_{arg.name}"] = n * DTYPE_SIZES[self.dtype_of(arg.dtype, params)]
        return out

    def roofline(self, params: Mapping[str, object]) -> tuple[float, float]:
        """(FLOPs, minimal bytes) of one workload."""
        env = {**_numeric(params), **self.nbytes(params)}
        return (
            float(formula.evaluate(self.spec.roofline.flops, env)),
            float(formula.evaluate(self.spec.roofline.bytes, env)),
        )

    def compute_dtype(self, params: Mapping[str, object]) -> str:
        return self.dtype_of(self.spec.roofline.compute_dtype, params)


def _numeric(params: Mapping[str, object]) -> dict[str, int | float]:
    return {k: v for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def resolve_dtype(dtype: str, params: Mapping[str, object]) -> str:
    """A dtype field is a dtype name, or the name of a workload parameter holding one."""
    if dtype in DTYPE_SIZES:
        return dtype
    value = params.get(dtype)
    if not isinstance(value, str) or value not in DTYPE_SIZES:
        raise formula.FormulaError(f"{dtype!r} is neither a dtype nor a parameter holding one")
    return value


def resolve_shape(shape: Iterable[int | str], params: Mapping[str, object]) -> tuple[int, ...]:
    dims = []
    for dim in shape:
        value = formula.evaluate(dim, _numeric(params))
        if int(value) != value or value < 0:
            raise formula.FormulaError(f"dimension {dim!r} = {value} is not a non-negative integer")
        dims.append(int(value))
    return tuple(dims)


@dataclass
class LoadReport:
    """What a load found: the tasks that validated and every problem in the tree."""

    tasks: list[Task] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def by_slug(self) -> dict[str, Task]:
        return {t.slug: t for t in self.tasks}


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _python_defs(path: Path, root: Path, problems: list[Problem]) -> tuple[set[str], bool] | None:
    """Top-level function names of a Python file and whether it has a ``@triton.jit`` kernel."""
    rel = _rel(path, root)
    if not path.is_file():
        problems.append(Problem(rel, "", "file is missing"))
        return None
    try:
        tree = python_ast.parse(path.read_text(encoding="utf-8"), filename=rel)
    except (SyntaxError, UnicodeDecodeError) as exc:
        problems.append(Problem(rel, f"line {getattr(exc, 'lineno', '?')}", f"does not parse: {exc}"))
        return None
    funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    jit = any(
        isinstance(n, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in n.decorator_list)
        for n in ast.walk(tree)
    )
    return funcs, jit


def _check_workload(task: Task, w: Workload, where: str, rel: str, problems: list[Problem]) -> None:
    spec = task.spec
    p = w.params
    for i, arg in enumerate(spec.inputs):
        _check_tensor(task, arg, p, f"{where}: inputs.{i} ({arg.name})", rel, problems)
    for i, out in enumerate(spec.outputs):
        _check_tensor(task, out, p, f"{where}: outputs.{i} ({out.name})", rel, problems)
    for s in spec.scalars:
        if s.param not in p:
            problems.append(Problem(rel, f"{where}: params", f"scalar {s.name!r} needs parameter {s.param!r}"))
    try:
        flops, nbytes = task.roofline(p)
        if flops < 0 or nbytes <= 0:
            problems.append(Problem(rel, f"{where}: roofline", f"flops={flops}, bytes={nbytes} must be positive"))
        task.compute_dtype(p)
    except formula.FormulaError as exc:
        problems.append(Problem(rel, f"{where}: roofline", str(exc)))


def _check_tensor(task: Task, arg: object, params: Mapping[str, object], where: str, rel: str,
                  problems: list[Problem]) -> None:
    try:
        task.dtype_of(arg.dtype, params)  # type: ignore[attr-defined]
        task.shape_of(arg.shape, params)  # type: ignore[attr-defined]
        init = getattr(arg, "init", None)
        if init is not None:
            for name in ("mean", "std", "low", "high"):
                formula.evaluate(getattr(init, name), _numeric(params))
    except formula.FormulaError as exc:
        problems.append(Problem(rel, where, str(exc)))


def _validate_task(task: Task, root: Path, problems: list[Problem]) -> None:
    spec = task.spec
    rel_toml = _rel(task.toml_path, root)
    input_names = {a.name for a in spec.inputs}
    for i, out in enumerate(spec.outputs):
        if out.may_alias and out.may_alias not in input_names:
            problems.append(Problem(rel_toml, f"outputs.{i}.may_alias", f"no input named {out.may_alias!r}"))
        elif out.may_alias and not _input(spec.inputs, out.may_alias).writable:
            problems.append(Problem(rel_toml, f"outputs.{i}.may_alias", f"input {out.may_alias!r} is not writable"))
    aliased = {out.may_alias for out in spec.outputs if out.may_alias}
    for i, arg in enumerate(spec.inputs):
        if arg.updated and not arg.writable:
            problems.append(Problem(rel_toml, f"inputs.{i}.updated", f"input {arg.name!r} is updated in place, "
                                                                      "so it must be writable"))
        elif arg.updated and arg.name not in aliased:
            problems.append(Problem(rel_toml, f"inputs.{i}.updated", f"input {arg.name!r} is updated in place, "
                                                                      "but no output names it in may_alias"))
    for i, w in enumerate(spec.workloads):
        _check_workload(task, w, f"workloads.{i} ({w.name})", rel_toml, problems)
    for i, w in enumerate(spec.smoke):
        where = f"smoke.{i} ({w.name})"
        _check_workload(task, w, where, rel_toml, problems)
        for arg in [*spec.inputs, *spec.outputs]:
            try:
                if task.dtype_of(arg.dtype, w.params) == "bf16":
                    problems.append(Problem(rel_toml, where, f"{arg.name} is bf16, which Triton's interpreter "
                                            "computes wrongly; smoke workloads use fp16 or fp32"))
                    break
            except formula.FormulaError:
                pass

    baseline = _python_defs(task.baseline_path, root, problems)
    if baseline is not None:
        funcs, _ = baseline
        rel = _rel(task.baseline_path, root)
        needed = {spec.entry_point}
        if spec.reference.mode == "function":
            needed.add("reference")
        if spec.generator == "custom":
            needed.add("make_inputs")
        if spec.canonicalize:
            needed.add("canonicalize")
        for name in sorted(needed - funcs):
            problems.append(Problem(rel, name, f"must define a top-level function {name}()"))
    expert = _python_defs(task.expert_path, root, problems)
    if expert is not None:
        funcs, jit = expert
        rel = _rel(task.expert_path, root)
        if spec.entry_point not in funcs:
            problems.append(Problem(rel, spec.entry_point, "the expert kernel must define the entry point"))
        if not jit:
            problems.append(Problem(rel, "", "the expert kernel has no @triton.jit function"))
    for level in GUIDANCE_LEVELS:
        path = task.guidance_path(level)
        rel = _rel(path, root)
        if not path.is_file():
            problems.append(Problem(rel, "", "guidance file is missing"))
            continue
        text = path.read_text(encoding="utf-8")
        if len(text.strip()) < _MIN_GUIDANCE_CHARS:
            problems.append(Problem(rel, "", f"guidance is shorter than {_MIN_GUIDANCE_CHARS} characters"))
        if "```" in text:
            problems.append(Problem(rel, "", "guidance gives design ideas only: no code blocks"))


def _input(inputs: list[TensorArg], name: str) -> TensorArg:
    return next(a for a in inputs if a.name == name)


def load_task(task_dir: Path, root: Path = REPO_ROOT) -> tuple[Task | None, list[Problem]]:
    """Load and validate one task folder; returns the task (or None) and its problems."""
    problems: list[Problem] = []
    toml_path = task_dir / "task.toml"
    rel = _rel(toml_path, root)
    try:
        data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, [Problem(rel, "", "file is missing")]
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return None, [Problem(rel, "", f"is not valid TOML: {exc}")]
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            loc = ".".join(str(part) for part in err["loc"]) or "(top level)"
            problems.append(Problem(rel, loc, err["msg"]))
        return None, problems
    if spec.slug != task_dir.name:
        problems.append(Problem(rel, "slug", f"{spec.slug!r} does not match its folder {task_dir.name!r}"))
    task = Task(spec=spec, root=root)
    _validate_task(task, root, problems)
    return (task if not problems else None), problems


def load_tasks(root: Path = REPO_ROOT, strict: bool = False) -> LoadReport:
    """Load every ``tasks/*/task.toml`` under ``root``, sorted by task id."""
    report = LoadReport()
    task_root = root / "tasks"
    for task_dir in sorted(p for p in task_root.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        if not (task_dir / "task.toml").exists() and not (task_dir / "baseline.py").exists():
            continue
        task, problems = load_task(task_dir, root)
        report.problems.extend(problems)
        if task is not None:
            report.tasks.append(task)
    seen: dict[str, str] = {}
    for task in report.tasks:
        if task.spec.id in seen:
            report.problems.append(Problem(_rel(task.toml_path, root), "id",
                                           f"{task.spec.id} is also used by {seen[task.spec.id]}"))
        seen[task.spec.id] = task.slug
    report.tasks.sort(key=lambda t: t.spec.id)
    if strict and report.problems:
        raise TaskLoadError(report.problems)
    return report


def get_task(slug: str, root: Path = REPO_ROOT) -> Task:
    """Load one task by slug, raising :class:`TaskLoadError` with its problems if invalid."""
    task_dir = root / "tasks" / slug
    if not task_dir.is_dir():
        raise TaskLoadError([Problem(f"tasks/{slug}", "", "no such task")])
    task, problems = load_task(task_dir, root)
    if task is None:
        raise TaskLoadError(problems)
    return task
