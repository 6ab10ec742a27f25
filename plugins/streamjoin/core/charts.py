"""Inline SVG charts for the status page, rendered on the server: a time-series line chart and a sparkline.
No JavaScript, nothing fetched: the SVG is part of the HTML. Pure: no Airflow, no Spark.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

Point = tuple[float, float]


@dataclass(frozen=True)
class Series:
    """One line: its name (legend, ``data-series``), its ``(t epoch s, value)`` points and colour;
    ``breaks``: times where the line starts anew (nothing is drawn across the gap before them); ``dashed``: drawn
    dashed over the lines before it, so a line with the same values (processed = input) does not hide one."""

    label: str
    points: Sequence[Point]
    color: str
    breaks: Sequence[float] = ()
    dashed: bool = False


def segments(points: Sequence[Point], breaks: Sequence[float]) -> list[list[Point]]:
    """``points`` (in time order) cut before the first point at or after each break."""
    out: list[list[Point]] = []
    pending = sorted(breaks)
    for point in points:
        cut = False
        while pending and pending[0] <= point[0]:
            pending.pop(0)
            cut = True
        if not out or cut:
            out.append([])
        out[-1].append(point)
    return out


def downsample(points: Sequence[Point], max_points: int) -> list[Point]:
    """At most about ``max_points`` points: the smallest and the largest of each of ``max_points // 2`` equal
    time buckets, in time order, so spikes survive."""
    ordered = sorted(points)
    if len(ordered) <= max_points or max_points < 2:
        return ordered
    buckets = max_points // 2
    t0, t1 = ordered[0][0], ordered[-1][0]
    width = (t1 - t0) / buckets or 1.0
    groups: dict[int, list[Point]] = {}
    for point in ordered:
        groups.setdefault(min(buckets - 1, int((point[0] - t0) / width)), []).append(point)
    out: list[Point] = []
    for group in groups.values():
        low, high = min(group, key=lambda p: p[1]), max(group, key=lambda p: p[1])
        out += sorted({low, high})
    return out


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k at or above ``value`` (1 for nothing above 0)."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power * (1 + 1e-9):
            return step * power
    return 10 * power


def number(value: float) -> str:
    """A short label: 950, 1.2k, 3.4M, 0.25."""
    size = abs(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if size >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def clock(t: float, span: float) -> str:
    """``HH:MM`` UTC (with seconds when the chart covers less than 10 minutes)."""
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S" if span < 600 else "%H:%M")


def line_chart(
    name: str,
    title: str,
    series: Sequence[Series],
    *,
    start: float,
    end: float,
    markers: Sequence[tuple[float, str]] = (),
    width: int = 560,
    height: int = 170,
    max_points: int = 400,
) -> str:
    """An ``<svg class="chart" data-chart=name data-points=N>``: per series a polyline for each stretch
    between its breaks over ``[start, end]`` (y from 0 to a round maximum), dots where there are few points,
    dashed vertical ``markers`` (time, label: shown beside the line's top, and as its tooltip), axis labels in
    UTC; "no data" without points."""
    left, right, top, bottom = 52, 10, 22, 22
    plot_w, plot_h = width - left - right, height - top - bottom
    end = max(end, start + 1)
    shown = [(s, downsample([p for p in s.points if start <= p[0] <= end], max_points)) for s in series]
    n_points = sum(len(points) for _, points in shown)
    top_value = nice_ceiling(max((v for _, points in shown for _, v in points), default=0.0))

    def x(t: float) -> float:
        return left + (t - start) / (end - start) * plot_w

    def y(v: float) -> float:
        return top + plot_h - max(0.0, v) / top_value * plot_h

    parts = [
        f"<svg class='chart' data-chart='{escape(name)}' data-points='{n_points}' xmlns='http://www.w3.org/2000/svg' "
        f"width='{width}' height='{height}' viewBox='0 0 {width} {height}' role='img' aria-label='{escape(title)}'>",
        f"<text x='{left}' y='14' class='title'>{escape(title)}</text>",
    ]
    for fraction in (0.0, 0.5, 1.0):
        gy = y(top_value * fraction)
        parts.append(f"<line x1='{left}' y1='{gy:.1f}' x2='{width - right}' y2='{gy:.1f}' class='grid'/>")
        parts.append(f"<text x='{left - 4}' y='{gy + 4:.1f}' text-anchor='end' class='axis'>"
                     f"{number(top_value * fraction)}</text>")  # fmt: skip
    span = end - start
    parts.append(f"<text x='{left}' y='{height - 6}' class='axis'>{clock(start, span)}</text>")
    parts.append(f"<text x='{width - right}' y='{height - 6}' text-anchor='end' class='axis'>"
                 f"{clock(end, span)} UTC</text>")  # fmt: skip
    for t, label in markers:
        if start <= t <= end:
            mx = x(t)
            parts.append(f"<line x1='{mx:.1f}' y1='{top}' x2='{mx:.1f}' y2='{top + plot_h}' class='marker'>"
                         f"<title>{escape(label)}</title></line>")  # fmt: skip
            # the label beside the line, on the side with room for it
            side, anchor = (mx + 3, "start") if mx < left + plot_w * 0.75 else (mx - 3, "end")
            parts.append(f"<text x='{side:.1f}' y='{top + 9}' text-anchor='{anchor}' class='marker-label'>"
                         f"{escape(label)}</text>")  # fmt: skip
    legend_x = width - right
    for s, _ in reversed(shown):  # the legend from the right, the first series leftmost
        legend_x -= 8 + 7 * len(s.label)
        parts.append(f"<text x='{legend_x}' y='14' fill='{escape(s.color)}' class='legend'>{escape(s.label)}</text>")
    for s, points in shown:  # the lines in order: a later (dashed) one over the earlier ones
        parts.append(f"<g data-series='{escape(s.label)}' data-points='{len(points)}'>")
        for stretch in segments(points, s.breaks):
            coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in stretch)
            dash = " stroke-dasharray='6 4'" if s.dashed else ""
            parts.append(f"<polyline points='{coords}' fill='none' stroke='{escape(s.color)}' stroke-width='2'{dash}/>")
        parts.append("</g>")
        if len(points) <= 60:  # (a dashed series' dots are smaller: an earlier series' dot shows around them)
            radius = 1.5 if s.dashed else 2.5
            parts += [f"<circle cx='{x(t):.1f}' cy='{y(v):.1f}' r='{radius}' fill='{escape(s.color)}'/>"
                      for t, v in points]  # fmt: skip
    if not n_points:
        parts.append(f"<text x='{left + plot_w / 2:.0f}' y='{top + plot_h / 2:.0f}' text-anchor='middle' "
                     "class='empty'>no data in this period</text>")  # fmt: skip
    parts.append("</svg>")
    return "".join(parts)


def sparkline(
    points: Sequence[Point],
    *,
    breaks: Sequence[float] = (),
    color: str = "#1f77b4",
    width: int = 120,
    height: int = 26,
) -> str:
    """A small ``<svg class="sparkline">`` of ``points`` (y from 0 to their maximum; a line per stretch
    between ``breaks``), empty without points."""
    points = downsample(points, 2 * width)
    if not points:
        return f"<svg class='sparkline' data-points='0' width='{width}' height='{height}'></svg>"
    t0, t1 = points[0][0], points[-1][0]
    top = max(v for _, v in points) or 1.0
    lines = "".join(
        "<polyline points='" + " ".join(
            f"{(t - t0) / ((t1 - t0) or 1) * (width - 2) + 1:.1f},{height - 1 - max(0.0, v) / top * (height - 2):.1f}"
            for t, v in stretch
        ) + f"' fill='none' stroke='{escape(color)}' stroke-width='1.5'/>"
        for stretch in segments(points, breaks)
    )  # fmt: skip
    return (f"<svg class='sparkline' data-points='{len(points)}' xmlns='http://www.w3.org/2000/svg' width='{width}' "
            f"height='{height}'>{lines}</svg>")  # fmt: skip
