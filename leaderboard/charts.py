"""Plotly figures of the leaderboard, built from plain data on the server and shipped as JSON.

The pages render them with the plotly.js that the ``plotly`` package ships (served from our own
static files: the site works offline). Builders take plain rows, not querysets, so they are
tested without a database and every page feeds them through :mod:`leaderboard.selectors`.
Every figure has a title, axis titles with units, and hover text naming the task (and the
workload where a point is one).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from evaluator.scoring import ABLATION_CONDITIONS

FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 13}
TEMPLATE = "plotly_white"


@functools.cache
def _template_json() -> str:
    """The template as JSON, resolved once per process.

    Setting ``template=`` on a figure deep-copies and re-validates the whole template (about 90 ms
    of the ~120 ms a figure took; the pairs page builds 21), yet its JSON is the same every time.
    """
    return json.dumps(json.loads(pio.to_json(go.Figure(layout={"template": TEMPLATE}), validate=True))["layout"]["template"])


def _finish(fig: go.Figure, title: str, x: str, y: str, **layout: Any) -> dict[str, Any]:
    fig.update_layout(title={"text": title}, xaxis_title=x, yaxis_title=y, font=FONT,
                      margin={"l": 70, "r": 30, "t": 60, "b": 70}, legend={"orientation": "h", "y": -0.2},
                      **layout)
    out = json.loads(pio.to_json(fig, validate=True))
    out["layout"]["template"] = json.loads(_template_json())  # a fresh copy: callers may edit their figure
    return out


@dataclass(frozen=True)
class PairPoint:
    """One task (or workload) of a pair: speedups over eager, None where that side failed."""

    task: str
    workload: str
    unguided: float | None
    guided: float | None


def paired_scatter(points: Sequence[PairPoint], experts: dict[str, float], title: str) -> dict[str, Any]:
    """Unguided (x) vs guided (y) speedup, log axes, the y = x line, each task's expert as a star."""
    ok = [p for p in points if p.unguided and p.guided]
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[p.unguided for p in ok], y=[p.guided for p in ok], mode="markers", name="agent (task/workload)",
        marker={"size": 9, "color": "#1f77b4"},
        text=[f"{p.task} · {p.workload}" for p in ok],
        hovertemplate="%{text}<br>unguided %{x:.2f}×<br>guided %{y:.2f}×<extra></extra>"))
    shown_experts = {t: s for t, s in experts.items() if s and s > 0}
    if shown_experts:
        fig.add_trace(go.Scatter(
            x=list(shown_experts.values()), y=list(shown_experts.values()), mode="markers", name="expert kernel",
            marker={"symbol": "star", "size": 13, "color": "#d62728"}, text=list(shown_experts),
            hovertemplate="%{text}: expert %{x:.2f}×<extra></extra>"))
    values = [v for p in ok for v in (p.unguided, p.guided)] + list(shown_experts.values())
    lo, hi = (min(values) / 1.5, max(values) * 1.5) if values else (0.1, 10.0)
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="y = x (guidance did not help)",
                             line={"dash": "dash", "color": "#888"}, hoverinfo="skip"))
    failed = [p for p in points if not (p.unguided and p.guided)]
    subtitle = f" ({len(failed)} failed on one side, not plotted)" if failed else ""
    return _finish(fig, title + subtitle, "unguided speedup over eager (×, log)", "guided speedup over eager (×, log)",
                   xaxis_type="log", yaxis_type="log")


@dataclass(frozen=True)
class ScoreBar:
    model: str
    condition: str
    score: float


def score_bars(rows: Iterable[ScoreBar], title: str = "Performance Score by guidance condition") -> dict[str, Any]:
    """Grouped bars: one group per model, one bar per condition, in the ablation order."""
    rows = list(rows)
    fig = go.Figure()
    conditions = [c for c in ABLATION_CONDITIONS if any(r.condition == c for r in rows)]
    for cond in conditions:
        sel = [r for r in rows if r.condition == cond]
        fig.add_trace(go.Bar(x=[r.model for r in sel], y=[r.score for r in sel], name=cond,
                             hovertemplate="%{x}<br>" + cond + ": %{y:.3f}<extra></extra>"))
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888", annotation_text="PyTorch eager = 1.0")
    return _finish(fig, title, "model", "Performance Score (geometric-mean speedup over eager)", barmode="group")


def ablation(curves: dict[str, Sequence[tuple[str, float]]], title: str = "Guidance layer ablation") -> dict[str, Any]:
    """One line per model over none → L1 → L1+L2 → L1+L2+L3."""
    fig = go.Figure()
    for model, points in curves.items():
        fig.add_trace(go.Scatter(x=[c for c, _ in points], y=[s for _, s in points], mode="lines+markers", name=model,
                                 hovertemplate=model + "<br>%{x}: %{y:.3f}<extra></extra>"))
    fig.update_xaxes(categoryorder="array", categoryarray=list(ABLATION_CONDITIONS))
    return _finish(fig, title, "guidance given", "Performance Score (× over eager)")


@dataclass(frozen=True)
class CategoryCount:
    label: str  # the row: model · condition
    category: str
    correct: int
    total: int


def correctness_by_category(rows: Iterable[CategoryCount], title: str = "Correctness by task category") -> dict[str, Any]:
    rows = list(rows)
    fig = go.Figure()
    for label in dict.fromkeys(r.label for r in rows):
        sel = [r for r in rows if r.label == label]
        fig.add_trace(go.Bar(x=[r.category for r in sel], y=[100.0 * r.correct / r.total if r.total else 0 for r in sel],
                             name=label, customdata=[[r.correct, r.total] for r in sel],
                             hovertemplate=label + "<br>%{x}: %{customdata[0]}/%{customdata[1]} correct"
                                                   "<extra></extra>"))
    return _finish(fig, title, "task category", "tasks correct (%)", barmode="group", yaxis_range=[0, 100])


@dataclass(frozen=True)
class SolPoint:
    label: str
    task: str
    sol_fraction: float | None


def sol_per_task(rows: Iterable[SolPoint], title: str = "Fraction of speed of light per task") -> dict[str, Any]:
    rows = list(rows)
    fig = go.Figure()
    for label in dict.fromkeys(r.label for r in rows):
        sel = [r for r in rows if r.label == label and r.sol_fraction is not None and math.isfinite(r.sol_fraction)]
        fig.add_trace(go.Bar(x=[r.task for r in sel], y=[100.0 * r.sol_fraction for r in sel], name=label,
                             hovertemplate=label + "<br>%{x}: %{y:.1f}% of SOL<extra></extra>"))
    return _finish(fig, title, "task", "speed-of-light fraction (%)", barmode="group")


@dataclass(frozen=True)
class JudgePoint:
    label: str
    task: str
    design: float
    implementation: float


def design_vs_implementation(rows: Iterable[JudgePoint],
                             title: str = "Design score vs implementation score") -> dict[str, Any]:
    rows = list(rows)
    fig = go.Figure()
    for label in dict.fromkeys(r.label for r in rows):
        sel = [r for r in rows if r.label == label]
        fig.add_trace(go.Scatter(x=[r.design for r in sel], y=[r.implementation for r in sel], mode="markers",
                                 name=label, text=[r.task for r in sel],
                                 hovertemplate=label + "<br>%{text}<br>design %{x:.0f}, implementation %{y:.0f}"
                                                       "<extra></extra>"))
    fig.add_trace(go.Scatter(x=[0, 100], y=[0, 100], mode="lines", name="y = x", line={"dash": "dash", "color": "#888"},
                             hoverinfo="skip"))
    return _finish(fig, title, "design score (0–100, judge)", "implementation score (0–100, judge)",
                   xaxis_range=[0, 100], yaxis_range=[0, 100])
