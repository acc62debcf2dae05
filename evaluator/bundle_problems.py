"""A refusal of an upload: the file it concerns, the rule it broke and what to do about it."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Problem:
    file: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.message} (rule: {self.rule})"

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


class BundleInvalid(Exception):
    """The upload was refused; nothing was stored. ``problems`` lists every rule it broke."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))
