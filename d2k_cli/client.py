"""A small HTTP client for ``/api/v1/`` over the standard library (a team needs nothing else).

Every error the API returns has one body, ``{"error": {"code", "message", "details"}}``; it is
raised as :class:`ApiError` with the HTTP status and, for 429, the ``Retry-After`` seconds.
"""

from __future__ import annotations

import json
import mimetypes
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib import error, request


@dataclass
class ApiError(Exception):
    status: int
    code: str
    message: str
    details: Any = None
    retry_after: int | None = None

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


def _multipart(fields: dict[str, str], files: dict[str, Path]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    for name, path in files.items():
        ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        head = (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{path.name}"\r\n'
                f"Content-Type: {ctype}\r\n\r\n").encode()
        parts.append(head + path.read_bytes() + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class Client:
    def __init__(self, base_url: str, token: str, timeout_s: float = 120.0):
        self.base = base_url.rstrip("/") + "/api/v1"
        self.token = token
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body: bytes | None = None, content_type: str | None = None,
              headers: dict[str, str] | None = None) -> tuple[int, Any]:
        req = request.Request(self.base + path, data=body, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if content_type:
            req.add_header("Content-Type", content_type)
        for key, value in (headers or {}).items():
            req.add_header(key, value)
        try:
            with request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 - the user's own portal URL
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except error.HTTPError as exc:
            raw = exc.read()
            try:
                body_json = json.loads(raw).get("error", {})
            except (ValueError, AttributeError):
                body_json = {"code": "http_error", "message": raw.decode(errors="replace")[:500]}
            retry = exc.headers.get("Retry-After")
            raise ApiError(exc.code, body_json.get("code", "error"), body_json.get("message", ""),
                           body_json.get("details"), int(retry) if retry and retry.isdigit() else None) from None

    def submit(self, bundle: Path, *, hardware: str | None = None, idempotency_key: str = "") -> tuple[int, dict]:
        fields = {"hardware": hardware} if hardware else {}
        body, ctype = _multipart(fields, {"bundle": bundle})
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return self._call("POST", "/submissions/", body, ctype, headers)

    def submission(self, pk: int) -> dict:
        return self._call("GET", f"/submissions/{pk}/")[1]

    def results(self, pk: int) -> list[dict]:
        return self._call("GET", f"/submissions/{pk}/results/")[1]

    def cancel(self, pk: int) -> dict:
        return self._call("POST", f"/submissions/{pk}/cancel/", b"{}", "application/json")[1]
