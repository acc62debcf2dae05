"""The schema of ``tasks/<slug>/task.toml``: what a task declares, as typed models.

One model per table of the file. Pydantic reports every problem of a file at once with the
path of the field (``inputs.0.shape``), which is what the loader turns into
``file: field: message`` lines. Rules that need the whole task (a shape naming a parameter
that a workload does not bind, a formula that does not evaluate) live in ``registry.py``.
The format is documented for task authors in ``docs/task-format.md``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tasks import formula

SCHEMA_VERSION = 1

#: dtype names a task may use, with their size in bytes.
DTYPE_SIZES: dict[str, int] = {
    "bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "fp8e4m3": 1, "fp8e5m2": 1,
    "int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8, "bool": 1,
}
FLOAT_DTYPES = {"bf16", "fp16", "fp32", "fp64", "fp8e4m3", "fp8e5m2"}

CATEGORIES = (
    "attention", "moe", "quantization", "norm-activation", "position", "other",
    "sampling", "linear-algebra", "ssm-linear-attention",
)

Slug = Annotated[str, Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$", max_length=64)]
Ident = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=64)]
ParamValue = int | float | str | bool


class _Strict(BaseModel):
    """Unknown keys are errors: a misspelt field must not be silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Origin(_Strict):
    """The real kernel the task is modelled on (facts carry over, code never does)."""

    repo: str
    path: str
    symbol: str = ""
    commit: str = ""


class Init(_Strict):
    """How the generic input generator fills a tensor."""

    dist: Literal["normal", "uniform", "randint", "zeros", "ones", "arange"] = "normal"
    mean: float | str = 0.0
    std: float | str = 1.0  # a number, or a formula of workload parameters
    low: float | str = 0.0
    high: float | str = 1.0

    @field_validator("mean", "std", "low", "high")
    @classmethod
    def _formula(cls, value: float | str) -> float | str:
        if isinstance(value, str):
            formula.parse(value)
        return value

    @model_validator(mode="after")
    def _check(self) -> Init:
        numbers = all(isinstance(v, (int, float)) for v in (self.low, self.high))
        if self.dist in ("uniform", "randint") and numbers and not self.high > self.low:
            raise ValueError("high must be greater than low")
        if self.dist == "normal" and isinstance(self.std, (int, float)) and self.std <= 0:
            raise ValueError("std must be positive")
        return self


class TensorArg(_Strict):
    """A tensor input: its shape is a list of integers or names of workload parameters."""

    name: Ident
    shape: list[int | str]
    dtype: str
    writable: bool = False
    # The kernel must update it in place (vLLM's caches, a conv state): after the call it holds the
    # output that names it in ``may_alias``. Implies ``writable``; the judge checks it (rule "in-place").
    updated: bool = False
    init: Init = Init()
    doc: str = ""

    @field_validator("shape")
    @classmethod
    def _shape(cls, shape: list[int | str]) -> list[int | str]:
        for dim in shape:
            if isinstance(dim, str):
                formula.parse(dim)
            elif dim < 0:
                raise ValueError("a dimension cannot be negative")
        return shape


class ScalarArg(_Strict):
    """A Python scalar passed to the entry point, taken from a workload parameter."""

    name: Ident
    param: Ident
    doc: str = ""


class Compare(_Strict):
    """How one output is compared with the reference (EVALUATION.md, Correctness).

    ``allclose``: every element within ``atol + rtol * |ref|``; ``normalized``:
    ``max|out - ref| / max(1, max|ref|) <= tol``; ``exact``: bit-equal; ``match_rate``: at least
    ``min_match`` of the elements within ``atol + rtol * |ref|`` (quantized codes, where a value on
    a rounding boundary may legitimately land on either neighbour). Tolerances default to the
    per-dtype table in ``evaluator/compare.py``; the keys here override them per dtype.
    """

    rule: Literal["allclose", "normalized", "exact", "match_rate"] = "allclose"
    min_match: float = Field(0.99, gt=0.0, le=1.0)
    atol: dict[str, float] = {}
    rtol: dict[str, float] = {}
    tol: dict[str, float] = {}
    eager_slack: float = Field(2.0, ge=1.0)

    @field_validator("atol", "rtol", "tol")
    @classmethod
    def _dtypes(cls, table: dict[str, float]) -> dict[str, float]:
        unknown = set(table) - set(DTYPE_SIZES)
        if unknown:
            raise ValueError(f"unknown dtype key(s): {', '.join(sorted(unknown))}")
        if any(v < 0 for v in table.values()):
            raise ValueError("tolerances cannot be negative")
        return table


class Output(_Strict):
    """A returned tensor, in the order the entry point returns them."""

    name: Ident
    shape: list[int | str]
    dtype: str
    may_alias: Ident | None = None
    compare: Compare = Compare()
    doc: str = ""


class Workload(_Strict):
    """One concrete problem: parameters bound to the names used by shapes and formulas."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
    model: str = ""
    params: dict[str, ParamValue]
    note: str = ""


class Roofline(_Strict):
    """FLOPs and minimal bytes as formulas; ``nbytes_<tensor>`` names are bound for you."""

    flops: str | int
    bytes: str | int
    compute_dtype: str = "dtype"
    # "latency": the op is too small for either roof to bind (routing over a few thousand tokens):
    # the SOL fraction is shown for information and the targets are the speedups alone.
    bound: Literal["roofline", "latency"] = "roofline"

    @field_validator("flops", "bytes")
    @classmethod
    def _parse(cls, value: str | int) -> str | int:
        if isinstance(value, str):
            formula.parse(value)
        return value


class Reference(_Strict):
    """Where the ground truth comes from.

    ``function``: ``reference()`` in baseline.py; ``baseline_fp32``/``baseline_fp64``: the
    baseline run on inputs upcast to that precision.
    """

    mode: Literal["function", "baseline_fp32", "baseline_fp64"] = "baseline_fp32"


#: Every ATen op that computes a matrix product in a library kernel (cuBLAS, cuBLASLt, CUTLASS,
#: cuDNN: a 1x1 convolution is a GEMM). A task that forbids ``aten::mm`` is a task whose work is
#: the GEMM, and naming every route by hand in each task.toml misses some (``_addmm_activation``,
#: ``addmv``, a convolution): such a task forbids this whole family. Ops a torch build lacks are
#: skipped where they are used (the op block, the recorder's lookups).
GEMM_FAMILY: tuple[str, ...] = (
    "aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm", "aten::_addmm_activation",
    "aten::mv", "aten::addmv", "aten::dot", "aten::vdot", "aten::matmul", "aten::linear", "aten::einsum",
    "aten::tensordot", "aten::chain_matmul", "aten::linalg_multi_dot", "aten::_int_mm", "aten::_scaled_mm",
    "aten::_scaled_mm_v2", "aten::_grouped_mm", "aten::_scaled_grouped_mm", "aten::_weight_int4pack_mm",
    "aten::_weight_int8pack_mm", "aten::_mixed_dtypes_linear", "aten::_sparse_semi_structured_linear",
    "aten::_cslt_sparse_mm", "aten::convolution", "aten::_convolution", "aten::cudnn_convolution",
    "aten::cudnn_convolution_transpose", "aten::cudnn_convolution_relu", "aten::cudnn_convolution_add_relu",
    "aten::convolution_overrideable", "aten::_slow_conv2d_forward", "aten::slow_conv3d_forward",
    "aten::slow_conv_dilated2d", "aten::slow_conv_dilated3d", "aten::slow_conv_transpose2d",
    "aten::slow_conv_transpose3d", "aten::mkldnn_convolution", "aten::mkldnn_linear",
)


#: Every ATen op that runs a fused attention library kernel (FlashAttention, memory-efficient,
#: cuDNN, the transformer fast paths that call them), forward and backward: a task that forbids
#: ``aten::scaled_dot_product_attention`` forbids them all, so a route its list does not name
#: (``_flash_attention_forward_no_dropout_inplace``, ``_native_multi_head_attention``) is refused too.
ATTENTION_FAMILY: tuple[str, ...] = (
    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_attention_math",
    "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_flash_attention_backward",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention", "aten::_scaled_dot_product_cudnn_attention_backward",
    "aten::_scaled_dot_product_fused_attention_overrideable",
    "aten::_scaled_dot_product_fused_attention_overrideable_backward",
    "aten::_flash_attention_forward", "aten::_flash_attention_forward_no_dropout_inplace",
    "aten::_flash_attention_backward", "aten::_efficient_attention_forward", "aten::_efficient_attention_backward",
    "aten::_cudnn_attention_forward", "aten::_cudnn_attention_backward", "aten::_native_multi_head_attention",
    "aten::_transformer_encoder_layer_fwd",
)
#: A forbidden op that stands for a family: listing it forbids every member.
FAMILIES: dict[str, tuple[str, ...]] = {"aten::mm": GEMM_FAMILY,
                                        "aten::scaled_dot_product_attention": ATTENTION_FAMILY}


class Forbidden(_Strict):
    """What a submission may not call: ATen ops (seen at run time) and Python names (static scan).

    ``aten`` as read is what task.toml lists, completed by each of :data:`FAMILIES` whose head
    it names (``aten::mm``: every library GEMM; ``aten::scaled_dot_product_attention``: every
    fused attention kernel): the recorder, the op block and the agent's prompt all see the
    completed list.
    """

    aten: list[str] = []
    python: list[str] = []
    reason: str = ""

    @field_validator("aten")
    @classmethod
    def _complete_families(cls, ops: list[str]) -> list[str]:
        out = list(ops)
        for head, family in FAMILIES.items():
            if head in ops:
                out += [op for op in family if op not in out]
        return out


class TaskSpec(_Strict):
    """Everything ``task.toml`` declares about one task."""

    schema_version: Literal[1]
    id: Annotated[str, Field(pattern=r"^T\d{2}$")]
    slug: Slug
    title: str = Field(min_length=3, max_length=120)
    category: Literal[CATEGORIES]  # type: ignore[valid-type]
    entry_point: Ident
    summary: str = Field(min_length=20)
    semantics: str = Field(min_length=20)
    notes: str = ""
    origin: list[Origin] = Field(min_length=1)
    inputs: list[TensorArg] = Field(min_length=1)
    scalars: list[ScalarArg] = []
    outputs: list[Output] = Field(min_length=1)
    reference: Reference = Reference()
    roofline: Roofline
    forbidden: Forbidden = Forbidden()
    generator: Literal["generic", "custom"] = "generic"
    # When true, baseline.py defines canonicalize(outputs, inputs, params) -> outputs, applied to
    # the candidate's, the baseline's and the reference's outputs before the numerical comparison
    # (after the structural checks): sort an index set whose order the op leaves free, dequantize
    # fp8 codes with their scales, and so on. It must return as many tensors as the task outputs.
    canonicalize: bool = False
    peak_memory: bool = False  # report each provider's peak device memory beside its time
    trials: int = Field(3, ge=3, le=20)
    workloads: list[Workload] = Field(min_length=1)
    smoke: list[Workload] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> TaskSpec:
        args = [a.name for a in self.inputs] + [s.name for s in self.scalars]
        if len(set(args)) != len(args):
            raise ValueError("input and scalar names must be unique")
        outs = [o.name for o in self.outputs]
        if len(set(outs)) != len(outs):
            raise ValueError("output names must be unique")
        for group in (self.workloads, self.smoke):
            names = [w.name for w in group]
            if len(set(names)) != len(names):
                raise ValueError("workload names must be unique")
        return self

    def input_names(self) -> list[str]:
        """Tensor inputs then scalars: the keyword arguments of the entry point."""
        return [a.name for a in self.inputs] + [s.name for s in self.scalars]
