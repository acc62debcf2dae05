"""The two kinds of failure, each with a stable code that results, templates and tests use.

``eval:user:*`` is the submission's fault (wrong answer, crash, timeout): final, it costs the
team its attempt. ``eval:infra:*`` is ours (the engine broke, the GPU vanished): retried, and it
does not count against the team. The codes are part of the result schema; never rename one.
"""

from __future__ import annotations


class EvaluationError(Exception):
    code = "eval:infra:unknown"

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        if code:
            self.code = code


class SubmissionError(EvaluationError):
    """The kernel under test is at fault."""

    code = "eval:user:error"


class EvaluatorError(EvaluationError):
    """The engine or the machine is at fault."""

    code = "eval:infra:error"


# Stable codes (a result's ``error_code``).
USER_IMPORT = "eval:user:import"  # the kernel file does not import
USER_ENTRY_POINT = "eval:user:entry-point"  # no such function
USER_EXCEPTION = "eval:user:exception"  # the call raised
USER_WRONG_ANSWER = "eval:user:wrong-answer"  # a trial failed a comparison rule
USER_TIMEOUT = "eval:user:timeout"  # wall-clock limit of the task exceeded
USER_CRASH = "eval:user:crash"  # the child died (signal, segfault, illegal address)
USER_EXIT = "eval:user:exit"  # the child exited without a result (SystemExit, os._exit)
USER_FORBIDDEN = "eval:user:forbidden-op"  # called an op the task forbids
USER_TIMED_MISMATCH = "eval:user:timed-call-mismatch"  # a checked timed call gave a wrong answer
USER_HOST_OOM = "eval:user:host-oom"  # the kernel exhausted host memory (its limit, or the watchdog)
USER_GPU_OOM = "eval:user:gpu-oom"  # the kernel exhausted device memory
USER_ILLEGAL_ADDRESS = "eval:user:illegal-address"  # CUDA illegal memory access (or another sticky CUDA error)
USER_PROCESS = "eval:user:process"  # the kernel started a process other than Triton's compilers
USER_TAMPER = "eval:user:tamper"  # the harness's timer, synchronization or recorder was patched
USER_TIMING_INTEGRITY = "eval:user:timing-integrity"  # work escaped the timer (the judge's clock disagrees)
USER_OUTPUT_FLOOD = "eval:user:output-flood"  # the kernel wrote more to stdout/stderr than allowed
USER_PROTOCOL = "eval:user:protocol"  # the candidate's process wrote a forged or malformed reply
INFRA_ERROR = "eval:infra:error"  # the engine itself failed
INFRA_PROTOCOL = "eval:infra:protocol"  # the child's report did not validate
INFRA_TASK = "eval:infra:task-invalid"  # the task files failed validation
INFRA_SANDBOX = "eval:infra:sandbox-unavailable"  # the sandbox is required and bubblewrap does not work here
# A trusted provider (the baseline, the expert) raised, ran out of memory, hung or died: our code, never
# the submission's fault (an optional one, torch.compile, is left untimed instead: evaluator.judge).
INFRA_TRUSTED = "eval:infra:trusted-provider"
