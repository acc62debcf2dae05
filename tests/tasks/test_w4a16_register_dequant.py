"""The w4a16-awq-gemm expert's register-dequant decode route (``_awq_regdq_kernel``, Gluon).

Gluon kernels do not run in Triton's interpreter, so CI checks the route in the two places it can
go wrong on a CPU machine, and the device bench checks its products on the real workloads:

* the unpack recipe: ``_DQ_PAIR_ASM`` is executed by a small emulator of its five PTX
  instructions with each lane's entries of ``_nibble_table``, on random words, zero points and
  scales, and must give the baseline's dequantized weights for every octet column, bit for bit;
* the build: at W1's and W2's shapes the route compiles for sm_90 with the unpacked weight fed
  to wgmma from registers (the layout change before the MMA is asserted trivial at compile time,
  so it moves no data), without spills.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from evaluator.modules import load_module
from tasks.registry import get_task
from tests.evaluator.test_preflight_sm90 import pf  # noqa: F401 (the sm_90 preflight, as a fixture)

TASK = "w4a16-awq-gemm"


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


def _f16x2(v: int) -> np.ndarray:
    return np.array([v & 0xFFFF, v >> 16], dtype=np.uint16).view(np.float16)


def _bits(h: np.ndarray) -> int:
    lo, hi = h.astype(np.float16).view(np.uint16)
    return int(lo) | int(hi) << 16


def _prmt(a: int, b: int, c: int) -> int:
    pool = [(a >> 8 * i) & 0xFF for i in range(4)] + [(b >> 8 * i) & 0xFF for i in range(4)]
    return sum(pool[(c >> 4 * i) & 0x7] << 8 * i for i in range(4))  # default mode: no sign replication


def _lop3(a: int, b: int, c: int, lut: int) -> int:
    out = 0
    for bit in range(32):
        idx = ((a >> bit) & 1) << 2 | ((b >> bit) & 1) << 1 | ((c >> bit) & 1)
        out |= ((lut >> idx) & 1) << bit
    return out


def run_asm(asm: str, operands: dict[int, int]) -> int:
    """Execute ``asm`` (prmt, shr, lop3, sub.f16x2, mul.f16x2 and ``.reg`` lines) on 32-bit
    operands $1.. and return $0; f16x2 arithmetic rounds each half to fp16 as the GPU does."""
    regs = {f"${i}": v for i, v in operands.items()}

    def val(tok: str) -> int:
        tok = tok.strip()
        return int(tok, 16) if tok.startswith("0x") else regs[tok]

    for line in asm.splitlines():
        line = line.strip().rstrip(";")
        if not line or line in "{}" or line.startswith(".reg"):
            continue
        op, args = line.split(None, 1)
        dst, *src = [a.strip() for a in args.split(",")]
        if op == "prmt.b32":
            regs[dst] = _prmt(*(val(s) for s in src))
        elif op == "shr.b32":
            regs[dst] = _u32(val(src[0]) >> val(src[1]))
        elif op == "lop3.b32":
            regs[dst] = _lop3(*(val(s) for s in src))
        elif op in ("sub.f16x2", "mul.f16x2"):
            a, b = _f16x2(val(src[0])), _f16x2(val(src[1]))
            regs[dst] = _bits(a - b if op.startswith("sub") else a * b)
        else:
            raise AssertionError(f"the emulator does not know {op}")
    return regs["$0"]


@pytest.fixture(scope="module")
def expert():
    return load_module(get_task(TASK).expert_path, "_regdq_test_expert")


@pytest.fixture(scope="module")
def base():
    return load_module(get_task(TASK).baseline_path, "_regdq_test_baseline")


def test_the_lane_recipe_unpacks_every_octet_column_like_the_baseline(expert, base) -> None:
    table = expert._nibble_table(torch.device("cpu")).tolist()
    sel, shift, zshift = table[:8], table[8:16], table[16:]
    rng = np.random.default_rng(0)
    for _ in range(300):
        words = rng.integers(0, 2**32, size=3, dtype=np.uint64).tolist()  # rows k, k + 1, and a zero word
        packed = torch.tensor([[w - 2**32 if w >= 2**31 else w for w in words]], dtype=torch.int32)
        codes = base._unpack(packed).view(3, 8)  # baseline order: [word, column]
        scale = np.float16(rng.uniform(-0.05, 0.05))
        for g in range(8):
            zero = ((words[2] >> zshift[g]) & 0xF) | 0x6400  # as the kernel encodes the zero point
            got = run_asm(expert._DQ_PAIR_ASM.value, {1: words[0], 2: words[1], 3: sel[g], 4: sel[g],
                                                      5: shift[g], 6: shift[g], 7: zero | zero << 16,
                                                      8: _bits(np.array([scale, scale]))})
            z = int(codes[2, g])
            want = [np.float16(np.float16(int(codes[r, g]) - z) * scale) for r in (0, 1)]
            assert list(_f16x2(got)) == want, (g, words)


def test_a_wrong_selector_or_lut_is_caught_by_the_emulator(expert) -> None:
    """The check above can fail: a selector off by one byte, or lop3's AND|OR table read as OR,
    changes the unpacked weights."""
    table = expert._nibble_table(torch.device("cpu")).tolist()
    words = {1: 0x87654321, 2: 0x0FEDCBA9, 3: table[1] ^ 0x1111, 4: table[1] ^ 0x1111, 5: table[9], 6: table[9],
             7: 0x64006400, 8: 0x3C003C00}
    right = {**words, 3: table[1], 4: table[1]}
    assert run_asm(expert._DQ_PAIR_ASM.value, words) != run_asm(expert._DQ_PAIR_ASM.value, right)
    broken = expert._DQ_PAIR_ASM.value.replace("0xEA", "0xFE")
    assert run_asm(broken, right) != run_asm(expert._DQ_PAIR_ASM.value, right)


@pytest.mark.parametrize("workload", ["W1", "W2"])
def test_the_route_builds_for_sm90_with_the_weight_as_a_register_operand(workload, tmp_path, expert, pf) -> None:  # noqa: F811
    (report,) = pf.preflight(get_task(TASK), [workload], False, {}, tmp_path)
    assert report.error == "", report.error
    builds = [b for b in report.builds if b.kernel == "_awq_regdq_kernel"]
    assert len(builds) == len(expert.REGDQ_TILES), report.builds
    for build in builds:
        assert build.wgmma and build.spill_stores == 0 and build.spill_loads == 0, build
        assert build.shared <= 16384, build  # packed words and one activation tile: no weight tile
    ptxs = list(tmp_path.glob("_awq_regdq_kernel-*.ptx"))
    assert len(ptxs) == len(builds)
    for ptx in ptxs:
        # the A operand of each wgmma is a list of registers, not a shared-memory descriptor
        mmas = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.f16\.f16\s+\{[^}]*\},\s*(\S)",
                          ptx.read_text())
        assert mmas and set(mmas) == {"{"}, (ptx.name, mmas[:4])
