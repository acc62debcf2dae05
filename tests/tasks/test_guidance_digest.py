"""The guidance digest: what a run states about the guidance text it was given."""

from __future__ import annotations

import re

from tasks.guidance import CONDITIONS, DIGEST_RE, guidance_digest, guidance_text, guided_versions

TEXTS = {"L1": "# L1\n\nalgorithm\n", "L2": "# L2\n\ndataflow\n", "L3": "# L3\n\ntechnique\n"}


def test_unguided_has_no_digest_and_each_guided_condition_its_own() -> None:
    assert guidance_digest(TEXTS, "none") == ""
    digests = {c: guidance_digest(TEXTS, c) for c in CONDITIONS if CONDITIONS[c]}
    assert len(set(digests.values())) == 3
    assert all(re.fullmatch(DIGEST_RE, d) for d in digests.values())
    assert [(c, d) for c, d, _ in guided_versions(TEXTS)] == list(digests.items())


def test_a_change_to_a_level_changes_only_the_conditions_that_give_it() -> None:
    changed = {**TEXTS, "L3": "# L3\n\ntechnique, and launch order\n"}
    assert guidance_digest(changed, "L1") == guidance_digest(TEXTS, "L1")
    assert guidance_digest(changed, "L1+L2") == guidance_digest(TEXTS, "L1+L2")
    assert guidance_digest(changed, "L1+L2+L3") != guidance_digest(TEXTS, "L1+L2+L3")


def test_surrounding_blank_lines_are_not_a_new_version_but_moving_text_between_levels_is() -> None:
    padded = {k: f"\n\n{v}\n\n" for k, v in TEXTS.items()}
    assert guidance_digest(padded, "L1+L2+L3") == guidance_digest(TEXTS, "L1+L2+L3")
    moved = {"L1": "# L1\n\nalgorithm\n\n# L2\n\ndataflow", "L2": "", "L3": TEXTS["L3"]}
    assert guidance_digest(moved, "L1+L2") != guidance_digest(TEXTS, "L1+L2")


def test_the_version_text_holds_each_level_in_order() -> None:
    text = guidance_text(TEXTS, "L1+L2")
    assert text.index("algorithm") < text.index("dataflow") and "technique" not in text
