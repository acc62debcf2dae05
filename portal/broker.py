"""Broker URL and transport options, shared by the settings and the tests.

Production uses Redis (``CELERY_BROKER_URL=redis://...``). With no broker configured the site
uses kombu's *filesystem* transport: each message is a file in a folder under ``var/broker/``.
It needs no server and no extra package, and unlike ``memory://`` it works between separate
processes (the web process queues, the worker consumes), which is all a single machine needs.
It is not for production: no visibility timeout, so a message taken by a worker that is killed
hard is only restored when that worker shuts down cleanly.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kombu import Connection

EMBEDDED_BROKER_URL = "filesystem://"


def is_filesystem(url: str) -> bool:
    return url.startswith("filesystem:")


def transport_options(url: str, broker_dir: Path, visibility_timeout: int) -> dict[str, object]:
    """Options for ``broker_transport_options``; creates the folders of the embedded broker.

    ``visibility_timeout`` is how long Redis waits before redelivering an unacknowledged message.
    It must exceed the longest task (the hard time limit), or a long GPU run would be handed to
    a second worker while the first is still on it.
    """
    options: dict[str, object] = {"visibility_timeout": visibility_timeout}
    if is_filesystem(url):
        queue_dir = broker_dir / "queue"
        processed = broker_dir / "processed"
        control = broker_dir / "control"
        for folder in (queue_dir, processed, control):
            folder.mkdir(parents=True, exist_ok=True)
        options.update(
            data_folder_in=str(queue_dir),
            data_folder_out=str(queue_dir),
            processed_folder=str(processed),
            control_folder=str(control),
            store_processed=False,
        )
    return options


def held_task_args(conn: Connection, queue: str, task: str) -> list[list[Any]]:
    """The positional arguments of every ``task`` message the broker holds for ``queue``.

    "Held" means waiting in the queue or handed to a worker and not yet acknowledged (Redis keeps
    those in its ``unacked`` hash until the worker acknowledges or is lost). The submission sweep
    (:mod:`portal.submissions.sweep`) compares this with the database to find messages a broker
    lost. Reads only: nothing is consumed or moved. Supports the two transports the site runs
    on (Redis, the embedded filesystem broker) and raises ``NotImplementedError`` for others.
    """
    channel = conn.default_channel
    transport = conn.transport_cls if isinstance(conn.transport_cls, str) else type(conn.transport).__name__
    payloads: list[dict[str, Any]] = []
    if transport in ("redis", "rediss"):
        client = channel.client
        for name in dict.fromkeys(channel._q_for_pri(queue, pri) for pri in channel.priority_steps):
            payloads += [json.loads(raw) for raw in client.lrange(name, 0, -1)]
        for raw in client.hvals(channel.unacked_key):
            payload, _exchange, routing_key = json.loads(raw)
            if routing_key == queue:
                payloads.append(payload)
    elif is_filesystem(transport):
        folder = Path(channel.data_folder_in)
        for name in os.listdir(folder):
            if name.endswith(f".{queue}.msg"):
                try:
                    payloads.append(json.loads((folder / name).read_text(encoding="utf-8")))
                except (FileNotFoundError, json.JSONDecodeError):  # consumed (or being written) meanwhile
                    continue
    else:
        raise NotImplementedError(f"cannot list the messages of a {transport} broker")
    held = []
    for payload in payloads:
        message = channel.Message(payload, channel=channel)
        if (message.headers or {}).get("task") == task:
            args, _kwargs, _embed = message.decode()
            held.append(list(args))
    return held
