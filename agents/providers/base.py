"""What every provider shares: its configuration, the reply shape, and retries with backoff.

Retries live here rather than in the SDKs (their own retries are switched off) so that every
attempt, wait and final failure is visible to the loop: a transient error (429, 5xx, a dropped
connection, a timeout) is retried and never costs a turn; anything else is fatal and ends the
run with ``provider-error`` instead of pretending the call succeeded.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from agents.transcript import Event, ToolCall, Usage

T = TypeVar("T")
TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


@dataclass(frozen=True)
class ProviderConfig:
    provider: str  # "openai" | "anthropic"
    model: str
    base_url: str | None = None
    api_key_env: str = ""  # name of the environment variable holding the key
    timeout_s: float = 600.0
    max_retries: int = 6
    backoff_s: float = 2.0  # first wait; doubles per attempt, with jitter, capped at backoff_cap_s
    backoff_cap_s: float = 60.0
    max_tokens: int = 16384
    temperature: float | None = None

    def api_key(self) -> str:
        name = self.api_key_env or {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}[self.provider]
        key = os.environ.get(name, "")
        if not key:
            raise ProviderError(f"no API key: set the environment variable {name}", transient=False)
        return key


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema of the arguments object


@dataclass
class ModelReply:
    content: str
    tool_calls: list[ToolCall]
    usage: Usage
    stop: str  # the provider's own stop reason, for the record
    retries: int = 0  # transient failures retried before this reply
    raw: dict[str, Any] = field(default_factory=dict)


class ProviderError(RuntimeError):
    def __init__(self, message: str, transient: bool, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.transient = transient
        self.status = status
        self.retry_after = retry_after


class Provider(Protocol):
    config: ProviderConfig

    def complete(self, system: str, history: list[Event], tools: list[ToolSpec]) -> ModelReply: ...


def _retry_after(headers: Any) -> float | None:
    try:
        value = headers.get("retry-after") if headers is not None else None
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


def classify(exc: Exception) -> ProviderError:
    """Map an SDK exception (either SDK) to a :class:`ProviderError` that says if a retry may help."""
    if isinstance(exc, ProviderError):
        return exc
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    name = type(exc).__name__
    if status is not None:
        return ProviderError(f"{name} (HTTP {status}): {exc}"[:2000], status in TRANSIENT_STATUS or status >= 500,
                             status, _retry_after(getattr(response, "headers", None)))
    if name in ("APIConnectionError", "APITimeoutError") or isinstance(exc, (TimeoutError, ConnectionError)):
        return ProviderError(f"{name}: {exc}"[:2000], True)
    return ProviderError(f"{name}: {exc}"[:2000], False)


def with_retries(config: ProviderConfig, call: Callable[[], T], sleep: Callable[[float], None] = time.sleep,
                 on_retry: Callable[[ProviderError, float], None] | None = None) -> tuple[T, int]:
    """Run ``call``; retry transient failures with exponential backoff (or the server's Retry-After).

    Returns (result, retries used). Raises the last :class:`ProviderError` when attempts run out
    or the failure is not transient.
    """
    attempt = 0
    while True:
        try:
            return call(), attempt
        except Exception as exc:  # noqa: BLE001 - classified below, re-raised as ProviderError
            err = classify(exc)
            if not err.transient or attempt >= config.max_retries:
                raise err from exc
            wait = err.retry_after
            if wait is None:
                wait = min(config.backoff_cap_s, config.backoff_s * 2**attempt) * (0.5 + random.random() / 2)
            if on_retry:
                on_retry(err, wait)
            sleep(wait)
            attempt += 1
