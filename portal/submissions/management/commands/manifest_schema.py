"""``manage.py manifest_schema [--output docs/manifest-schema.json]``: the manifest's JSON Schema."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand

from evaluator.manifest import json_schema_text


class Command(BaseCommand):
    help = "Print (or write) the JSON Schema of submission.toml, generated from the pydantic model."

    def add_arguments(self, parser) -> None:  # noqa: ANN001
        parser.add_argument("--output", type=Path)

    def handle(self, *args: object, output: Path | None = None, **options: object) -> None:
        text = json_schema_text()
        if output:
            output.write_text(text, encoding="utf-8")
            self.stdout.write(f"wrote {output}")
        else:
            self.stdout.write(text, ending="")
