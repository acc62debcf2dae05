"""The manifest's JSON Schema file is current, and the documented example bundle is accepted."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema
import pytest

from evaluator.manifest import json_schema_text, parse_manifest
from portal.submissions.actions import known_tasks
from portal.submissions.validation import check_bundle
from tests.portal.factories import expert_source, make_zip

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_schema_file_is_generated_from_the_model():
    assert (DOCS / "manifest-schema.json").read_text(encoding="utf-8") == json_schema_text(), \
        "regenerate: python manage.py manifest_schema --output docs/manifest-schema.json"


def test_example_manifest_validates_offline_and_in_the_portal():
    raw = (DOCS / "examples" / "bundle" / "submission.toml").read_bytes()
    schema = json.loads((DOCS / "manifest-schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(tomllib.loads(raw.decode()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**tomllib.loads(raw.decode()), "colour": "blue"}, schema)
    manifest, problems = parse_manifest(raw)
    assert manifest is not None and problems == []


@pytest.mark.django_db
def test_example_bundle_as_documented_is_accepted(catalogue, settings):
    blob = make_zip({"submission.toml": (DOCS / "examples" / "bundle" / "submission.toml").read_bytes(),
                     "silu-and-mul/kernel.py": expert_source("silu-and-mul")})
    validated = check_bundle(blob, "bundle.zip", known_tasks=known_tasks())
    assert validated.hardware == "h200" and [t.slug for t in validated.tasks] == ["silu-and-mul"]


def test_example_transcript_is_valid():
    from agents.transcript import parse

    transcript = parse((DOCS / "examples" / "bundle" / "transcript.jsonl").read_bytes(), budget=350)
    assert transcript.header.task == "silu-and-mul" and transcript.turns_used == 2
