"""The D2K-Bench engine: judges a Triton kernel against a task's baseline, with no Django.

``python -m evaluator tasks | check | bench``; the library entry point is
:func:`evaluator.runner.run`. Every task runs in its own child process (``evaluator.child``).
"""

ENGINE_VERSION = "0.1.0"
