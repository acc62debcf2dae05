"""Bounded capture of a process's stdout and stderr: a flood of output cannot fill memory."""

from __future__ import annotations

import threading
from typing import IO


class TailBuffer:
    """Keeps the last ``cap`` bytes of a stream, counting what was dropped."""

    def __init__(self, cap: int):
        self.cap = cap
        self.data = bytearray()
        self.dropped = 0
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk
        if len(self.data) > self.cap:
            cut = len(self.data) - self.cap
            self.dropped += cut
            del self.data[:cut]

    def text(self) -> str:
        prefix = f"[... {self.dropped} bytes dropped ...]\n" if self.dropped else ""
        return prefix + self.data.decode("utf-8", errors="replace")


def drain(stream: IO[bytes], buf: TailBuffer) -> threading.Thread:
    """Read ``stream`` into ``buf`` on a daemon thread until EOF."""

    def run() -> None:
        for chunk in iter(lambda: stream.read(65536), b""):
            buf.feed(chunk)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread
