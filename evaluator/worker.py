"""The worker: ``python -m evaluator.worker FD`` runs the calls the judge hands it, nothing more.

This is the only process that imports a submission (or the expert kernel, or the baseline when
it is timed). It never sees a seed, a reference output or a tolerance: the judge writes each
call's inputs into the shared arena (``evaluator.arena``), the worker calls the provider on
tensors viewing them, copies the outputs into the judge's slots, and answers one JSON line on
the socket ``FD`` with what it measured. Everything here runs next to code we do not trust, so
the judge treats the answer as a claim to verify (docs/engine.md, Threat model):

- the harness takes its own references to the timer, the synchronization and the socket before
  the provider is imported, and reports any of the watched functions found replaced (a
  moderator-readable ``tampered`` list);
- check calls run with NaN left in the caching allocator and the ATen ops recorded;
- timed calls queue the L2 flush, record device events around the call and synchronize the
  whole device, so work on a side stream is waited for (and shows up on the judge's clock).
"""

from __future__ import annotations

import builtins
import gc
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
import triton  # imported before the snapshot, so its own set-up is not "tampering"

from evaluator import hold as _hold_module
from evaluator import op_block
from evaluator.arena import Arena, open_arena
from evaluator.aten_record import AtenRecorder
from evaluator.modules import load_module
from evaluator.protocol import (
    CHOICE_PREFIX,
    LINE_CAP,
    Call,
    Done,
    LoadError,
    ProviderSpec,
    Ready,
    Release,
    Setup,
    TensorRef,
)

# The harness's own references, taken before any provider is imported.
_perf = time.perf_counter
_dumps = json.dumps
_sendall = socket.socket.sendall
_cuda_sync = torch.cuda.synchronize
_Event = torch.cuda.Event
_spin = _hold_module.hold  # holds every SM: a one-thread spin would leave side streams the rest


def _watched() -> dict[str, Any]:
    """The functions a cheat would patch to fake a time or a comparison, by dotted name."""
    import torch.testing
    from torch.utils import _python_dispatch

    me = sys.modules[__name__]
    return {
        "time.perf_counter": time.perf_counter, "time.perf_counter_ns": time.perf_counter_ns,
        "time.monotonic": time.monotonic, "time.time": time.time,
        "torch.cuda.synchronize": torch.cuda.synchronize, "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
        "torch.Tensor.copy_": torch.Tensor.copy_, "torch.allclose": torch.allclose, "torch.equal": torch.equal,
        "torch.testing.assert_close": torch.testing.assert_close,
        "TorchDispatchMode.__enter__": _python_dispatch.TorchDispatchMode.__enter__,
        "TorchDispatchMode.__exit__": _python_dispatch.TorchDispatchMode.__exit__,
        "AtenRecorder.__torch_dispatch__": AtenRecorder.__torch_dispatch__,
        "json.dumps": json.dumps, "socket.socket.sendall": socket.socket.sendall,
        "builtins.__import__": builtins.__import__, "evaluator.worker._perf": me._perf,
        "evaluator.worker._cuda_sync": me._cuda_sync, "evaluator.worker._Event": me._Event,
        "evaluator.worker._sendall": me._sendall, "evaluator.worker._spin": me._spin,
        "evaluator.hold.hold": _hold_module.hold, "evaluator.hold._hold_kernel": _hold_module._hold_kernel,
        "triton.runtime.jit.JITFunction.run": triton.runtime.jit.JITFunction.run,
        **{f"evaluator.worker.Worker.{n}": getattr(me.Worker, n) for n in ("run_call", "_timed", "_checked",
                                                                             "_copy_out", "_structure", "_reply")},
    }


def _tampered(snapshot: dict[str, Any]) -> list[str]:
    now = _watched()
    return sorted(name for name, obj in snapshot.items() if now.get(name) is not obj)


def _as_outputs(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else tuple(value) if isinstance(value, list) else (value,)


def _byte_range(t: torch.Tensor) -> tuple[int, int]:
    if t.numel() == 0:
        return (0, 0)
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True))
    start = t.data_ptr()
    return start, start + span * t.element_size()


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    (a0, a1), (b0, b1) = _byte_range(a), _byte_range(b)
    return a.device == b.device and a0 < b1 and b0 < a1


def _poison_allocator(device: torch.device, nbytes: int) -> None:
    """Leave NaN in the blocks the caching allocator hands out next, so an output element the
    kernel never writes reads back as NaN instead of a plausible stale value."""
    if device.type != "cuda" or nbytes <= 0:
        return
    blocks = [torch.full((max(1, nbytes // 4),), float("nan"), dtype=torch.float32, device=device) for _ in range(2)]
    del blocks


def timed_picks(modules: list[ModuleType]) -> dict[str, str]:
    """What kernel modules chose by timing: each module-level Triton autotuner's pick per tuning
    key (``"name [key]"``; a tuner kept in a module-level dict is named after the dict), and the
    entries of a module-level ``TIMED_CHOICES`` dict (``"choice <key>"``), where a kernel records a
    choice of its own, such as a route timed against another. Capped in count and length. Also
    used by scripts/first_call_probe.py, which reads the same picks outside the worker."""
    from triton.runtime.autotuner import Autotuner

    found: dict[str, str] = {}

    def tuner(name: str, value: Any) -> None:
        cache = getattr(value, "cache", None)
        if type(cache) is dict and cache:
            for key, config in list(cache.items())[:AUTOTUNE_KEYS]:
                found[f"{name} [{_key_text(key)}]"[:NAME_CAP]] = str(config)[:VALUE_CAP]
        elif getattr(value, "best_config", None) is not None:
            found[name] = str(value.best_config)[:VALUE_CAP]

    for module in modules:
        for name, value in vars(module).items():
            if isinstance(value, Autotuner):
                tuner(name, value)
            elif type(value) is dict and name != "TIMED_CHOICES":
                for item in list(value.values())[:AUTOTUNE_KEYS]:
                    if isinstance(item, Autotuner):
                        tuner(name, item)
        choices = vars(module).get("TIMED_CHOICES")
        if type(choices) is dict:
            for key, choice in list(choices.items())[:AUTOTUNE_KEYS]:
                found[f"{CHOICE_PREFIX}{key}"[:NAME_CAP]] = str(choice)[:VALUE_CAP]
    return dict(list(found.items())[:AUTOTUNE_ENTRIES])


class Worker:
    def __init__(self, setup: Setup, sock: socket.socket):
        self.setup = setup
        self.sock = sock
        self.device = torch.device("cpu") if setup.device == "cpu" else torch.device("cuda", 0)
        self.arena: Arena = open_arena(setup.arena_fd, setup.arena_size, self.device)
        self.flush = (torch.empty(setup.flush_bytes // 4, dtype=torch.float32, device=self.device)
                      if self.device.type == "cuda" and setup.flush_bytes else None)
        self.spin_ns = int(setup.spin_us * 1e3) if self.device.type == "cuda" and setup.spin_us > 0 else 0
        self.spin_layout = _hold_module.layout_for(self.device) if self.spin_ns else (0, 0)
        self.spin_flush = self.flush
        if self.spin_ns:  # compiled here, before any provider is imported, not in a timed call
            if self.spin_flush is None:  # the spin writes the flush itself (evaluator/hold.py)
                self.spin_flush = torch.empty(0, device=self.device)
            _spin(self.spin_flush, 1_000, *self.spin_layout)
            _cuda_sync(self.device)
        self.providers: dict[str, Callable[..., Any]] = {}
        self.modules: list[ModuleType] = []
        self.snapshot = _watched()
        # Last, after the harness's own set-up and before any provider is imported.
        self.op_block = op_block.block(setup.forbidden_ops, self.device.type)

    def load(self) -> bool:
        return all(self._load_one(name, spec) for name, spec in self.setup.providers.items())

    def _load_one(self, name: str, spec: ProviderSpec) -> bool:
        try:
            module = load_module(spec.path, f"_d2k_provider_{name.replace('-', '_')}")
        except BaseException as exc:  # noqa: BLE001 - SystemExit at import is the kernel's fault too
            self._reply(LoadError(provider=name, kind="import", message=f"{type(exc).__name__}: {exc}"[:4000]))
            return False
        fn = getattr(module, spec.entry, None)
        if not callable(fn):
            self._reply(LoadError(provider=name, kind="entry-point",
                                  message=f"the kernel file defines no function {spec.entry}()"))
            return False
        self.modules.append(module)
        self.providers[name] = torch.compile(fn, dynamic=False) if spec.compile else fn
        return True

    def _reply(self, msg: Any) -> None:
        _sendall(self.sock, (msg.model_dump_json() + "\n").encode())

    # --- one call ----------------------------------------------------------------------
    def run_call(self, call: Call) -> Done:
        fn = self.providers.get(call.provider)
        if fn is None:
            return Done(seq=call.seq, ok=False, rule="protocol", message=f"no provider {call.provider!r}")
        args = {k: (self.arena.view(v) if isinstance(v, TensorRef) else v) for k, v in call.args.items()}
        slots = [self.arena.view(r) for r in call.outs]
        recorder = AtenRecorder() if call.mode == "check" and call.record and self.setup.record_ops else None
        try:
            peak = None
            if call.mode == "check":
                outs, ms = self._checked(fn, args, slots, recorder)
            elif call.measure_peak and self.device.type == "cuda":
                _cuda_sync(self.device)
                before = torch.cuda.memory_allocated(self.device)
                torch.cuda.reset_peak_memory_stats(self.device)
                outs, ms = self._timed(fn, args)
                peak = max(0, torch.cuda.max_memory_allocated(self.device) - before)
            else:
                outs, ms = self._timed(fn, args)
        except BaseException as exc:  # noqa: BLE001 - SystemExit inside a call is a failure, not an exit
            return Done(seq=call.seq, ok=False, rule="exception", exc_type=type(exc).__name__,
                        message=f"{type(exc).__name__}: {exc}"[:2000], ops=sorted(recorder.ops) if recorder else [])
        failure = self._structure(outs, args, slots)
        if failure is None:
            self._copy_out(outs, slots)
        done = Done(seq=call.seq, ok=failure is None, device_ms=ms, ops=sorted(recorder.ops) if recorder else [],
                    peak_mem_bytes=peak)
        if failure is not None:
            done.rule, done.output, done.message = failure
        return done

    def _checked(self, fn: Callable[..., Any], args: dict[str, Any], slots: list[torch.Tensor],
                 recorder: AtenRecorder | None) -> tuple[tuple[Any, ...], float]:
        _poison_allocator(self.device, sum(s.numel() * s.element_size() for s in slots))
        self._sync()
        t0 = _perf()
        if recorder is not None:
            with recorder:
                outs = _as_outputs(fn(**args))
        else:
            outs = _as_outputs(fn(**args))
        self._sync()
        return outs, (_perf() - t0) * 1e3

    def _timed(self, fn: Callable[..., Any], args: dict[str, Any]) -> tuple[tuple[Any, ...], float]:
        if self.device.type == "cpu":
            t0 = _perf()
            outs = _as_outputs(fn(**args))
            return outs, (_perf() - t0) * 1e3
        _cuda_sync(self.device)
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        # The flush is queued and the call launched behind it without waiting: the host's
        # launch latency overlaps the flush, so the events time the device work alone.
        if self.spin_ns:  # the flush and the spin in one kernel that holds every SM
            _spin(self.spin_flush, self.spin_ns, *self.spin_layout)
        elif self.flush is not None:
            self.flush.zero_()
        start.record()
        outs = _as_outputs(fn(**args))
        end.record()
        _cuda_sync(self.device)  # device-wide: work on a side stream is waited for too
        return outs, start.elapsed_time(end)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            _cuda_sync(self.device)

    def _structure(self, outs: tuple[Any, ...], args: dict[str, Any],
                   slots: list[torch.Tensor]) -> tuple[str, str, str] | None:
        """The checks that need the kernel's own tensors: count, type, shape, dtype, device, aliasing."""
        decl = self.setup.outputs
        if len(outs) != len(decl):
            return "arity", "", f"returned {len(outs)} outputs, the task has {len(decl)}"
        for i, (out, spec, slot) in enumerate(zip(outs, decl, slots, strict=True)):
            if type(out) is not torch.Tensor:
                return "type", spec.name, f"output is {type(out).__name__}, not a plain torch.Tensor"
            if out.shape != slot.shape:
                return "shape", spec.name, f"shape {tuple(out.shape)}, expected {tuple(slot.shape)}"
            if out.dtype != slot.dtype:
                return "dtype", spec.name, f"dtype {out.dtype}, expected {slot.dtype}"
            if out.device.type != self.device.type:
                return "device", spec.name, f"on {out.device}, expected {self.device}"
            for name in self.setup.inputs:
                value = args.get(name)
                if isinstance(value, torch.Tensor) and name != spec.may_alias and _overlaps(out, value):
                    return "alias", spec.name, f"shares memory with input {name!r}"
            for j, other in enumerate(outs[:i]):
                if _overlaps(out, other):
                    return "alias", spec.name, f"shares memory with output {decl[j].name!r}"
        return None

    def _copy_out(self, outs: tuple[Any, ...], slots: list[torch.Tensor]) -> None:
        """Every call's outputs go to the judge's slots, checked or not: the worker cannot tell."""
        for out, slot in zip(outs, slots, strict=True):
            slot.copy_(out)
        self._sync()

    def release(self) -> None:
        """Give the caching allocator's free blocks back to the driver (evaluator.protocol.Release)."""
        if self.device.type == "cuda":
            gc.collect()  # tensors held only by reference cycles go first
            torch.cuda.empty_cache()

    def autotune(self) -> dict[str, str]:
        """What the provider chose by timing so far (``timed_picks`` of its modules). Informational:
        the worker runs next to the provider, so this is a claim, capped in count and length."""
        return timed_picks(self.modules)

    def serve(self, reader: Any) -> None:
        while True:
            line = reader.readline(LINE_CAP)
            if not line:
                return
            msg = json.loads(line)
            if msg.get("op") == "quit":
                return
            if msg.get("op") == "release":
                done = Done(seq=Release.model_validate(msg).seq, ok=True)
                self.release()
            else:
                done = self.run_call(Call.model_validate(msg))
            done.tampered = _tampered(self.snapshot)
            if not op_block.intact(self.op_block):
                done.tampered.append("evaluator.op_block (the forbidden-op block was removed or overridden)")
            done.autotune = self.autotune()
            self._reply(done)


#: Caps on the autotune report: entries per tuner or choice dict, entries in all, and characters.
AUTOTUNE_KEYS, AUTOTUNE_ENTRIES, NAME_CAP, VALUE_CAP = 32, 128, 200, 500


def _key_text(key: Any) -> str:
    """A tuning key (a tuple of argument values and dtype names) as ``a, b, c``."""
    return ", ".join(map(str, key)) if type(key) is tuple else str(key)


def main() -> int:
    sock = socket.socket(fileno=int(sys.argv[1]))
    reader = sock.makefile("rb")
    setup = Setup.model_validate_json(reader.readline(LINE_CAP))
    worker = Worker(setup, sock)
    if not worker.load():
        return 0
    worker._reply(Ready(providers=sorted(worker.providers)))
    worker.serve(reader)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip torch's slow interpreter teardown: nothing is left to save


if __name__ == "__main__":
    sys.exit(main())
