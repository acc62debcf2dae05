"""Which entries form rows, pairs and ablation curves; every number from evaluator.scoring."""

from __future__ import annotations

import math

from evaluator.scoring import TaskScore, failed_task, paired_comparison, submission_score
from leaderboard import board

SUITE = ["a", "b", "c", "d"]


def _entry(condition: str, speedups: dict[str, float | None], date: str = "2026-12-01", **kw) -> board.Entry:
    tasks = {s: (TaskScore(True, v) if v else failed_task("x")) for s, v in speedups.items()}
    return board.Entry(key=f"{condition}-{date}", team=kw.get("team", "t"), model=kw.get("model", "m"),
                       harness="h", condition=condition, budget=350, hardware="h200", tasks=tasks, date=date)


def test_rows_are_scored_by_the_scoring_module_and_sorted() -> None:
    weak = _entry("none", {"a": 1.0, "b": 1.2, "c": None, "d": 0.9})
    strong = _entry("L1+L2+L3", {"a": 2.0, "b": 2.5, "c": 1.5, "d": 1.1})
    got = board.rows([weak, strong], SUITE)
    assert [r.entry for r in got] == [strong, weak]
    assert got[1].score == submission_score(dict(weak.tasks), SUITE)
    assert math.isclose(got[0].score.performance_score, (2.0 * 2.5 * 1.5 * 1.1) ** 0.25)


def test_category_rows_only_count_that_category() -> None:
    e = _entry("none", {"a": 4.0, "b": None, "c": 1.0, "d": 1.0})
    (r,) = board.rows([e], ["a", "b"])
    assert r.score.suite_size == 2 and r.score.correct_count == 1


def test_pairs_need_the_same_team_model_harness_budget_hardware_and_tasks() -> None:
    u = _entry("none", {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0})
    g = _entry("L1+L2+L3", {"a": 2.0, "b": 2.0, "c": 2.0, "d": 0.5}, date="2026-12-02")
    other_team = _entry("L1", {"a": 3.0, "b": 3.0, "c": 3.0, "d": 3.0}, team="other")
    fewer_tasks = _entry("L1", {"a": 3.0, "b": 3.0, "c": 3.0})
    (p,) = board.pairs([u, g, other_team, fewer_tasks], n_boot=500)
    assert (p.unguided, p.guided) == (u, g)
    expected = paired_comparison(dict(u.tasks), dict(g.tasks), SUITE, n_boot=500)
    assert p.comparison == expected and math.isclose(p.comparison.per_task_ratios["d"], 0.5)


def test_latest_run_per_condition_and_ablation_order() -> None:
    runs = [_entry("none", {"a": 1.0}, "2026-11-01"), _entry("none", {"a": 1.5}, "2026-12-01"),
            _entry("L1+L2", {"a": 3.0}), _entry("L1", {"a": 2.0})]
    curves = board.ablations(runs, ["a"])
    (label, curve), = curves.items()
    assert label == "m (t)" and [c for c, _ in curve] == ["none", "L1", "L1+L2"]
    assert all(math.isclose(s, want) for (_, s), want in zip(curve, [1.5, 2.0, 3.0], strict=True))
    assert [p.guided.condition for p in board.pairs(runs, n_boot=200)] == ["L1", "L1+L2"]


def test_a_pair_restricted_to_some_of_its_tasks_is_compared_over_those_only() -> None:
    u = _entry("none", {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0})
    g = _entry("L1", {"a": 2.0, "b": 4.0, "c": None, "d": 0.5}, date="2026-12-02")
    (p,) = board.pairs([u, g], n_boot=300)
    assert board.restrict(p, SUITE, n_boot=300) is p  # nothing left out: the same pair
    assert board.restrict(p, [], n_boot=300) is None and board.restrict(p, ["z"], n_boot=300) is None
    sub = board.restrict(p, ["d", "a", "z"], n_boot=300)  # the pair's own order; unknown tasks ignored
    assert sub is not None and sub.suite == ("a", "d") and (sub.unguided, sub.guided) == (u, g)
    pick = ("a", "d")
    assert sub.comparison == paired_comparison({k: u.tasks[k] for k in pick}, {k: g.tasks[k] for k in pick}, pick,
                                               n_boot=300)
    assert set(sub.comparison.per_task_ratios) == {"a", "d"} and math.isclose(sub.comparison.score_ratio, 1.0)
