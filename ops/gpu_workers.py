"""Start one Celery worker per GPU, each pinned to its GPU, and keep them running.

ARCHITECTURE.md: one worker process per GPU, ``--concurrency 1``, pinned by
``CUDA_VISIBLE_DEVICES``, consuming the queue of the GPU's hardware profile (``gpu.h200``). Two
judgements must never share a GPU (the timings would interfere), and a worker that dies must come
back without taking the others down; that is this supervisor's job. Each worker gets a node name
that carries its GPU index (``gpu1@host``), so results and heartbeats say which GPU judged them.

Usage (on a GPU node, from the repository root):
    python -m ops.gpu_workers                      # every GPU nvidia-smi lists
    python -m ops.gpu_workers --gpus 0,1 --queue gpu.h200 -- --loglevel info
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

from evaluator.hardware import UnknownHardware, detect


@dataclass(frozen=True)
class Gpu:
    index: str  # as CUDA_VISIBLE_DEVICES takes it: an ordinal or a UUID
    name: str


@dataclass(frozen=True)
class WorkerPlan:
    gpu: Gpu
    queue: str
    node: str
    argv: list[str]
    env: dict[str, str]


def list_gpus(nvidia_smi: str = "nvidia-smi") -> list[Gpu]:
    """The GPUs of this node, from nvidia-smi (index and name)."""
    out = subprocess.run([nvidia_smi, "--query-gpu=index,name", "--format=csv,noheader"], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    gpus = []
    for line in out.splitlines():
        if line.strip():
            index, name = (part.strip() for part in line.split(",", 1))
            gpus.append(Gpu(index, name))
    return gpus


def queue_for(gpu: Gpu) -> str:
    """The Celery queue of the GPU's hardware profile; an unknown GPU has no queue (refused)."""
    try:
        return f"gpu.{detect(gpu.name).name}"
    except UnknownHardware as exc:
        raise SystemExit(f"GPU {gpu.index} ({gpu.name}) matches no hardware profile: {exc}") from None


def plan(gpus: list[Gpu], queue: str | None = None, app: str = "portal", host: str | None = None,
         extra: list[str] | None = None, base_env: dict[str, str] | None = None) -> list[WorkerPlan]:
    """One worker per GPU: its command line and environment. Pure, so it can be tested anywhere."""
    if not gpus:
        raise SystemExit("no GPU to start a worker for")
    indices = [g.index for g in gpus]
    if len(set(indices)) != len(indices):
        raise SystemExit(f"a GPU is listed twice: {indices}")
    host = host or socket.gethostname()
    env0 = dict(os.environ if base_env is None else base_env)
    plans = []
    for gpu in gpus:
        q = queue or queue_for(gpu)
        node = f"gpu{gpu.index}@{host}"
        env = {**env0, "CUDA_VISIBLE_DEVICES": gpu.index, "D2K_GPU_INDEX": gpu.index, "D2K_WORKER_NODE": node}
        argv = [sys.executable, "-m", "celery", "-A", app, "worker", "-Q", q, "-n", node,
                "--concurrency", "1", "--prefetch-multiplier", "1", "-O", "fair", *(extra or [])]
        plans.append(WorkerPlan(gpu, q, node, argv, env))
    return plans


class Supervisor:
    """Runs the planned workers; restarts one that exits (with backoff); stops all on SIGTERM/SIGINT."""

    def __init__(self, plans: list[WorkerPlan], max_restarts: int = 20):
        self.plans = plans
        self.max_restarts = max_restarts
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.restarts: dict[str, int] = {p.node: 0 for p in plans}
        self.stopping = False

    def _start(self, p: WorkerPlan) -> None:
        self.procs[p.node] = subprocess.Popen(p.argv, env=p.env)
        print(f"gpu_workers: {p.node} (CUDA_VISIBLE_DEVICES={p.gpu.index}, queue {p.queue}) "
              f"pid {self.procs[p.node].pid}", flush=True)

    def stop(self, *_: object) -> None:
        self.stopping = True
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # Celery's warm shutdown: the running task finishes

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        for p in self.plans:
            self._start(p)
        while not self.stopping:
            time.sleep(1.0)
            for p in self.plans:
                code = self.procs[p.node].poll()
                if code is None or self.stopping:
                    continue
                self.restarts[p.node] += 1
                if self.restarts[p.node] > self.max_restarts:
                    print(f"gpu_workers: {p.node} exited {code} too often; giving up on it", flush=True)
                    self.stop()
                    break
                wait = min(60, 2 ** self.restarts[p.node])
                print(f"gpu_workers: {p.node} exited with {code}; restarting in {wait} s", flush=True)
                time.sleep(wait)
                self._start(p)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=3600)
            except subprocess.TimeoutExpired:
                proc.kill()
        return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ops.gpu_workers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", help="comma-separated GPU indices or UUIDs (default: every GPU nvidia-smi lists)")
    ap.add_argument("--queue", help="queue for every worker (default: gpu.<profile of each GPU>)")
    ap.add_argument("--app", default="portal")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    ap.add_argument("extra", nargs="*", help="after --: more celery worker arguments")
    args = ap.parse_args(argv)
    if args.gpus:
        gpus = [Gpu(i.strip(), os.environ.get("D2K_GPU_NAME", "")) for i in args.gpus.split(",") if i.strip()]
        if not args.queue and not all(g.name for g in gpus):
            listed = {g.index: g for g in list_gpus()}
            gpus = [listed.get(g.index, g) for g in gpus]
    else:
        gpus = list_gpus()
    plans = plan(gpus, args.queue, args.app, extra=args.extra)
    if args.dry_run:
        for p in plans:
            print(f"{p.node}: CUDA_VISIBLE_DEVICES={p.gpu.index} {' '.join(p.argv)}")
        return 0
    return Supervisor(plans).run()


if __name__ == "__main__":
    raise SystemExit(main())
