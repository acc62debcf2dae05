"""Broker URL and transport options, shared by the settings and the tests.

Production uses Redis (``CELERY_BROKER_URL=redis://...``). With no broker configured the site
uses kombu's *filesystem* transport: each message is a file in a folder under ``var/broker/``.
It needs no server and no extra package, and unlike ``memory://`` it works between separate
processes (the web process queues, the worker consumes), which is all a single machine needs.
It is not for production: no visibility timeout, so a message taken by a worker that is killed
hard is only restored when that worker shuts down cleanly.
"""

from __future__ import annotations

from pathlib import Path

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
