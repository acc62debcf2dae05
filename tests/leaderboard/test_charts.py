"""Chart builders: valid Plotly JSON with titles, unit-bearing axis titles, log axes and hover text."""

from __future__ import annotations

from leaderboard import charts


def _axis_title(fig: dict, axis: str) -> str:
    return fig["layout"][axis]["title"]["text"]


def test_paired_scatter_has_log_axes_diagonal_experts_and_hover() -> None:
    pts = [charts.PairPoint("T09 fused-moe-mlp", "W1", 0.8, 2.4), charts.PairPoint("T01 attn", "W2", 1.5, 1.4),
           charts.PairPoint("T05 mla", "W1", None, 3.0)]
    fig = charts.paired_scatter(pts, {"T09 fused-moe-mlp": 3.1}, "model-x: guided vs unguided")
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["layout"]["yaxis"]["type"] == "log"
    agent, expert, diagonal = fig["data"]
    assert agent["x"] == [0.8, 1.5] and agent["text"][0] == "T09 fused-moe-mlp · W1"
    assert expert["marker"]["symbol"] == "star" and expert["x"] == [3.1]
    assert diagonal["x"] == diagonal["y"]
    assert "1 failed" in fig["layout"]["title"]["text"]
    assert "×" in _axis_title(fig, "xaxis") and "×" in _axis_title(fig, "yaxis")


def test_bars_ablation_categories_sol_and_judge_figures() -> None:
    bars = charts.score_bars([charts.ScoreBar("m", "none", 0.9), charts.ScoreBar("m", "L1+L2+L3", 1.6)])
    assert [t["name"] for t in bars["data"]] == ["none", "L1+L2+L3"] and bars["layout"]["barmode"] == "group"
    abl = charts.ablation({"m": [("none", 0.9), ("L1", 1.1), ("L1+L2", 1.3), ("L1+L2+L3", 1.6)]})
    assert abl["data"][0]["x"] == ["none", "L1", "L1+L2", "L1+L2+L3"]
    cat = charts.correctness_by_category([charts.CategoryCount("m · none", "attention", 3, 6)])
    assert cat["data"][0]["y"] == [50.0] and "%" in _axis_title(cat, "yaxis")
    sol = charts.sol_per_task([charts.SolPoint("expert", "T15", 0.92), charts.SolPoint("expert", "T16", None)])
    assert sol["data"][0]["x"] == ["T15"]
    judge = charts.design_vs_implementation([charts.JudgePoint("m", "T23", 80, 40)])
    assert judge["data"][0]["text"] == ["T23"] and judge["layout"]["xaxis"]["range"] == [0, 100]
