"""A TCP proxy the fault tests can cut and restore, put between the site and PostgreSQL.

``TcpProxy(upstream_port)`` listens on a free local port and relays bytes both ways, one pair
of threads per connection. ``cut()`` closes every relayed connection at once and refuses new
ones (each is accepted and closed at once, as a database behind a failed link or a restarting
server looks to its client); ``restore()`` relays again. ``cut_on(pattern)`` cuts at a precise
point of a conversation: when the client next sends ``pattern`` (after ``after``, if given),
either before that data reaches the server (``forward=False``: the statement never runs) or
right after it (``forward=True``: the server runs it but its answer never comes back, which is
the case of a COMMIT whose outcome the client cannot know).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass


@dataclass
class _Trigger:
    pattern: bytes
    after: bytes
    forward: bool


class _Link:
    """One client connection and its upstream twin; ``seen`` is what the client sent so far."""

    def __init__(self, client: socket.socket, upstream: socket.socket):
        self.client, self.upstream = client, upstream
        self.armed = False
        self.tail = b""

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class TcpProxy:
    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1"):
        self.upstream = (upstream_host, upstream_port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._lock = threading.Lock()
        self._links: set[_Link] = set()
        self._open = True
        self._trigger: _Trigger | None = None
        self.cut_at: float | None = None  # time.monotonic() of the last cut
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, name=f"tcp-proxy-{self.port}", daemon=True)
        self._thread.start()

    # --- control ----------------------------------------------------------------------------
    def cut(self) -> None:
        """Drop every relayed connection and refuse new ones until :meth:`restore`."""
        with self._lock:
            self._open = False
            self._trigger = None
            self.cut_at = time.monotonic()
            links, self._links = list(self._links), set()
        for link in links:
            link.close()

    def restore(self) -> None:
        with self._lock:
            self._open = True

    def cut_on(self, pattern: bytes, *, after: bytes = b"", forward: bool = False) -> None:
        """Cut when a client next sends ``pattern`` (once it has sent ``after``)."""
        with self._lock:
            self._trigger = _Trigger(pattern, after, forward)
            for link in self._links:
                link.armed, link.tail = not after, b""

    @property
    def is_cut(self) -> bool:
        return not self._open

    def close(self) -> None:
        self._stopped = True
        self.cut()
        with contextlib.suppress(OSError):
            self._server.close()
        self._thread.join(timeout=5)

    # --- relaying -------------------------------------------------------------------------------
    def _accept(self) -> None:
        self._server.settimeout(0.2)
        while not self._stopped:
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                refuse = not self._open
            if refuse:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            link = _Link(client, upstream)
            with self._lock:
                trigger = self._trigger
                link.armed = trigger is None or not trigger.after
                self._links.add(link)
            threading.Thread(target=self._pump_client, args=(link,), daemon=True).start()
            threading.Thread(target=self._pump, args=(link, link.upstream, link.client), daemon=True).start()

    def _pump(self, link: _Link, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        self._drop(link)

    def _pump_client(self, link: _Link) -> None:
        """Client to server, watching for the trigger; the tail keeps a pattern split across reads."""
        try:
            while data := link.client.recv(65536):
                with self._lock:
                    trigger = self._trigger
                    window = link.tail + data
                    fire = False
                    if trigger is not None:
                        if not link.armed and trigger.after in window:
                            link.armed = True
                            window = window[window.index(trigger.after) + len(trigger.after):]
                        fire = link.armed and trigger.pattern in window
                    keep = max(len(trigger.pattern), len(trigger.after)) if trigger else 0
                    link.tail = window[-keep:] if keep else b""
                if fire and not trigger.forward:
                    self.cut()
                    return
                if fire:  # the client hears nothing more, then the server gets the data and acts on it
                    with contextlib.suppress(OSError):
                        link.client.shutdown(socket.SHUT_RDWR)
                    link.upstream.sendall(data)
                    time.sleep(0.5)
                    self.cut()
                    return
                link.upstream.sendall(data)
        except OSError:
            pass
        self._drop(link)

    def _drop(self, link: _Link) -> None:
        with self._lock:
            self._links.discard(link)
        link.close()
