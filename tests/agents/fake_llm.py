"""A local HTTP server that speaks the OpenAI Chat Completions and Anthropic Messages wire formats.

It replays a scripted conversation: each POST consumes the next step, which is either a model
reply (text and tool calls) or an HTTP error (429 with Retry-After, 500, 400). The real SDKs talk
to it over a socket, so serialization, tool-call parsing, retries and budget accounting are
exercised for real. Every request body is recorded for assertions.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, arguments: dict or raw str)
    input_tokens: int = 100
    output_tokens: int = 20
    stop: str = ""  # the provider's stop reason ("length", "max_tokens"); default: what the reply implies


@dataclass
class Fail:
    status: int
    retry_after: str | None = None


class FakeLLM:
    def __init__(self, script: list[Reply | Fail]):
        self.script = list(script)
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._calls = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                status, headers, payload = server.respond(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> FakeLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def remaining(self) -> int:
        return len(self.script)

    def respond(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        with self._lock:
            self.requests.append((path, body))
            self._calls += 1
            n = self._calls
            if not self.script:
                return 500, {}, _error(path, "script exhausted", "api_error")
            step = self.script.pop(0)
        if isinstance(step, Fail):
            headers = {"retry-after": step.retry_after} if step.retry_after is not None else {}
            kind = "rate_limit_error" if step.status == 429 else "invalid_request_error" if step.status < 500 else "api_error"
            return step.status, headers, _error(path, f"scripted HTTP {step.status}", kind)
        if path.endswith("/chat/completions"):
            return 200, {}, _openai(body, step, n)
        if path.endswith("/messages"):
            return 200, {}, _anthropic(body, step, n)
        return 404, {}, _error(path, f"no route {path}", "not_found_error")


def _error(path: str, message: str, kind: str) -> dict[str, Any]:
    if path.endswith("/messages"):
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": None, "param": None}}


def _openai(body: dict[str, Any], r: Reply, n: int) -> dict[str, Any]:
    calls = [{"id": f"call_{n}_{i}", "type": "function",
              "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
             for i, (name, args) in enumerate(r.tool_calls)]
    message: dict[str, Any] = {"role": "assistant", "content": r.text or None}
    if calls:
        message["tool_calls"] = calls
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
            "choices": [{"index": 0, "finish_reason": r.stop or ("tool_calls" if calls else "stop"), "message": message,
                         "logprobs": None}],
            "usage": {"prompt_tokens": r.input_tokens, "completion_tokens": r.output_tokens,
                      "total_tokens": r.input_tokens + r.output_tokens}}


def _anthropic(body: dict[str, Any], r: Reply, n: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": r.text}] if r.text else []
    content += [{"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name,
                 "input": args if isinstance(args, dict) else json.loads(args)}
                for i, (name, args) in enumerate(r.tool_calls)]
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model", ""),
            "content": content, "stop_reason": r.stop or ("tool_use" if r.tool_calls else "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": r.input_tokens, "output_tokens": r.output_tokens}}
