"""Agents: the reference kernel-writing agent loop, the transcript format and the LLM judge.

Nothing here imports Django: the portal imports :mod:`agents.transcript` to validate uploads and
:mod:`agents.judge` from its Celery task, and the CLI (``python -m agents``) runs on a team's
own machine with nothing but an API key.
"""
