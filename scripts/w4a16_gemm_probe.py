"""Where the w4a16 two-pass route's time goes at a prefill shape, beside what cuBLAS does.

h100.md/h200.md list w4a16 W4 (M = 1,024) as slower than torch.compile of the baseline, which
keeps the dequantize-then-multiply split with cuBLAS doing the multiply. This script times, in one
process and with ``triton.testing.do_bench`` (L2 cleared between calls), the parts of that
comparison: the expert's unpack kernel alone; the expert's GEMMs on the unpacked weight (the
pointer kernel, and the persistent TMA kernel with each of its candidates); ``torch.mm`` on the
same unpacked weight (cuBLAS); the expert's whole routes; and torch.compile of the baseline. It
checks every GEMM against ``torch.mm`` first. Nothing here is judged: the bench's A/B is the
claim; this says which part a gap is in.

On a machine without a GPU (``--device cpu``, with TRITON_INTERPRET=1) it runs the same steps in
Triton's interpreter with one wall-clock call in place of ``do_bench`` and no torch.compile, which
is how CI checks that it still fits the expert's internals (a renamed kernel would otherwise cost
a device call).

Usage: python3 scripts/w4a16_gemm_probe.py [--expert PATH] [--workload W4 ...] [--json OUT] [--device cuda|cpu]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_kernel import find_workload, load  # noqa: E402

from evaluator.inputs import make_inputs  # noqa: E402
from tasks.registry import get_task  # noqa: E402


def _v(bm: int, bn: int, bk: int, group: int, stages: int, warps: int, **flags: bool) -> tuple[dict, int, int]:
    """One persistent-kernel variant: its constexprs, stages and warps."""
    return {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": group, "EPI_SPLIT": False, **flags}, stages, warps


#: The unpack kernel's (BK, BN, warps) besides the expert's (64, 256, 8).
UNPACK_TILES = [(128, 256, 8), (64, 512, 8), (32, 512, 4), (128, 128, 4), (64, 256, 4)]

#: Persistent-kernel variants timed beside the expert's own candidates: the stored tile in two
#: halves (room for a fourth stage at 128 x 256), other super-group sizes, a 128-wide K step and
#: one warp group. Not here: Triton's automatic warp specialization (``tl.range(...,
#: warp_specialize=True)``, documented for Blackwell only); Triton 3.6's Hopper pass for it fails
#: on this kernel when compiled for sm_90 ("tensor descriptor block and tensor types must match"
#: at the TMA store), on the tile loop or the K loop alike (scripts/preflight_sm90.py, session 30).
EXTRA = [
    _v(128, 256, 64, 8, 4, 8, EPI_SPLIT=True), _v(128, 256, 64, 8, 3, 8, EPI_SPLIT=True),
    _v(256, 128, 64, 8, 4, 8, EPI_SPLIT=True),
    _v(128, 128, 64, 4, 4, 8), _v(128, 128, 64, 16, 4, 8), _v(128, 128, 64, 8, 6, 8),
    _v(128, 128, 128, 8, 3, 8), _v(128, 128, 64, 8, 4, 4),
]


def probe(expert_path: Path, workload: str, dev: torch.device) -> dict:
    """Times in µs (medians of do_bench; on the CPU one call's wall) of each part at one
    workload, and the GEMMs' errors."""
    import triton
    from triton.tools.tensor_descriptor import TensorDescriptor

    on_cpu = dev.type == "cpu"
    if on_cpu:
        def us(fn) -> float:
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) * 1e6
    else:
        from triton.testing import do_bench

        def us(fn) -> float:
            return do_bench(fn, warmup=10, rep=100) * 1e3

    task = get_task("w4a16-awq-gemm")
    w = find_workload(task, workload)
    baseline = load(task.baseline_path, "_probe_base")
    expert = load(expert_path, "_probe_expert")
    inp = make_inputs(task, w.params, 0, dev, baseline)
    x, qw, qz, sc, G = inp["x"], inp["qweight"], inp["qzeros"], inp["scales"], inp["group_size"]
    M, K = x.shape
    N = sc.shape[1]
    fast = x.dtype == torch.float16
    row: dict = {"workload": workload, "M": M, "N": N, "K": K}

    wt = torch.empty(K, N, dtype=x.dtype, device=dev)
    bk, bn = min(64, G), 256

    def unpack() -> None:
        expert._awq_dequant_kernel[(K // bk, triton.cdiv(N, bn))](
            qw, qz, sc, wt, N, qw.stride(0), qz.stride(0), sc.stride(0), wt.stride(0),
            G=G, BK=bk, BN=bn, FAST_CVT=fast, num_warps=8)

    unpack()
    row["unpack"] = us(unpack)
    for ubk, ubn, uw in UNPACK_TILES:  # the unpack kernel's other tile shapes, same output
        if G % ubk:
            continue

        def unpack_v(ubk=ubk, ubn=ubn, uw=uw) -> None:
            expert._awq_dequant_kernel[(K // ubk, triton.cdiv(N, ubn))](
                qw, qz, sc, wt, N, qw.stride(0), qz.stride(0), sc.stride(0), wt.stride(0),
                G=G, BK=ubk, BN=ubn, FAST_CVT=fast, num_warps=uw)

        try:
            unpack_v()
            row[f"unpack {ubk}x{ubn} w{uw}"] = us(unpack_v)
        except Exception as exc:  # noqa: BLE001 - a tile that does not build is a finding
            row[f"unpack {ubk}x{ubn} w{uw}"] = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
    unpack()  # the expert's own tiles write the weight the GEMMs below read
    ref = torch.mm(x, wt)
    row["cublas mm"] = us(lambda: torch.mm(x, wt))
    out = torch.empty_like(ref)
    scale = ref.float().abs().max().item()

    def err() -> float:
        return round((out.float() - ref.float()).abs().max().item() / scale, 6)

    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
    args = (x, wt, out, M, N, x.stride(0), wt.stride(0), out.stride(0))
    if on_cpu:  # the interpreter cannot autotune: the first candidate
        first = expert._DENSE_CONFIGS[0]
        ptr = lambda: expert._dense_gemm_kernel[grid](*args, K=K, **first.kwargs)  # noqa: E731
    else:
        ptr = lambda: expert._dense_gemm_tuned[grid](*args, K=K)  # noqa: E731
    ptr()
    row["pointer gemm"] = us(ptr)
    row["pointer gemm error"] = err()
    row["pointer gemm pick"] = str(first if on_cpu else expert._dense_gemm_tuned.best_config)
    if hasattr(expert, "_dense_gemm_persistent_kernel"):
        sms = 2 if on_cpu else torch.cuda.get_device_properties(dev).multi_processor_count
        variants = [(dict(c.kwargs), c.num_stages, c.num_warps, True) for c in expert._PERSISTENT_CONFIGS]
        variants += [v + (True,) for v in EXTRA if v + (True,) not in variants]
        # The same kernel with a program per tile (the tile loop runs once): TMA without persistence.
        variants += [(kw, stages, warps, False) for kw, stages, warps, _ in variants[:4]]
        for kw, stages, warps, persistent in variants:
            split = kw.get("EPI_SPLIT", False)
            xd = TensorDescriptor.from_tensor(x, [kw["BM"], kw["BK"]])
            wd = TensorDescriptor.from_tensor(wt, [kw["BK"], kw["BN"]])
            cd = TensorDescriptor.from_tensor(out, [kw["BM"], kw["BN"] // 2 if split else kw["BN"]])
            tiles = triton.cdiv(M, kw["BM"]) * triton.cdiv(N, kw["BN"])
            progs = min(sms, tiles) if persistent else tiles
            name = (f"{'persistent' if persistent else 'tile-a-program'} {kw['BM']}x{kw['BN']}x{kw['BK']} "
                    f"g{kw['GROUP_M']} s{stages} w{warps}" + " epi-split" * split)

            def run(kw=kw, xd=xd, wd=wd, cd=cd, progs=progs, stages=stages, warps=warps) -> None:
                expert._dense_gemm_persistent_kernel[(progs,)](
                    xd, wd, cd, M, N, K=K, PROGRAMS=progs, INTERPRET=on_cpu, num_warps=warps, num_stages=stages,
                    **kw)

            try:
                out.zero_()
                run()
                row[name + " error"] = err()
                row[name] = us(run)
            except Exception as exc:  # noqa: BLE001 - a candidate that does not build is a finding
                row[name] = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
    out.zero_()
    expert.awq_gemm(x, qw, qz, sc, G)  # the first call picks the route
    row["expert call"] = us(lambda: expert.awq_gemm(x, qw, qz, sc, G))
    row["expert choices"] = dict(getattr(expert, "TIMED_CHOICES", {}))
    if on_cpu:
        row["compile"] = "not timed on the CPU"
        return row
    compiled = torch.compile(baseline.awq_gemm)
    compiled(x, qw, qz, sc, G)
    row["compile"] = us(lambda: compiled(x, qw, qz, sc, G))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--expert", type=Path, default=Path("references/w4a16-awq-gemm/expert.py"))
    ap.add_argument("--workload", action="append", default=None)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    rows = [probe(args.expert, w, torch.device(args.device)) for w in (args.workload or ["W4"])]
    for row in rows:
        for key, value in row.items():
            print(f"{row['workload']} {key}: {round(value, 1) if isinstance(value, float) else value}")
    if args.json:
        gpu = torch.cuda.get_device_name() if args.device != "cpu" else "none (interpreter)"
        args.json.write_text(json.dumps({"gpu": gpu, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
