"""Charts as inline SVG, drawn on the server (pure functions: numbers in, markup out).

No script and no library: the page's CSP allows none from elsewhere, and an SVG is
readable by a screen reader through its `<title>` and `<desc>`, and by a test through its
`data-*` attributes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 760
HEIGHT = 220
PAD_LEFT = 56
PAD_RIGHT = 12
PAD_TOP = 14
PAD_BOTTOM = 34


@dataclass(frozen=True)
class Mark:
    """A vertical marker at `x` (same units as the series' x), e.g. a compression."""

    x: float
    label: str


def _scale(value: float, lo: float, hi: float, out_lo: float, out_hi: float) -> float:
    if hi <= lo:
        return (out_lo + out_hi) / 2
    return out_lo + (value - lo) * (out_hi - out_lo) / (hi - lo)


def _ticks(hi: float, count: int = 4) -> list[float]:
    """Round gridline values (steps of 1, 2 or 5 × 10^k) from 0 up to `hi`, about `count`."""
    if hi <= 0:
        return [0.0]
    raw = hi / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    step = max(step, 1.0)  # counts: no fractional gridlines
    return [step * i for i in range(int(hi // step) + 1)]


def _fmt(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:.0f}"


def line_chart(
    points: Sequence[tuple[float, float]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    marks: Sequence[Mark] = (),
    chart_id: str = "",
) -> str:
    """A line over `points` (x ascending) with vertical `marks`; "" when there are no points."""
    if not points:
        return ""
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    x_lo, x_hi = min(xs + [m.x for m in marks]), max(xs + [m.x for m in marks])
    y_hi = max(ys) * 1.1 or 1.0
    left, right = PAD_LEFT, WIDTH - PAD_RIGHT
    top, bottom = PAD_TOP, HEIGHT - PAD_BOTTOM

    def sx(x: float) -> float:
        return round(_scale(x, x_lo, x_hi, left, right), 1)

    def sy(y: float) -> float:
        return round(_scale(y, 0, y_hi, bottom, top), 1)

    path = " ".join(f"{'M' if i == 0 else 'L'}{sx(x)},{sy(y)}" for i, (x, y) in enumerate(points))
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'aria-labelledby="{chart_id}-t {chart_id}-d"'
        + (f' id="{escape(chart_id)}"' if chart_id else "")
        + f' data-points="{len(points)}" data-marks="{len(marks)}">',
        f'<title id="{chart_id}-t">{escape(title)}</title>',
        f'<desc id="{chart_id}-d">{escape(y_label)} by {escape(x_label)}: {len(points)} points, '
        f"{len(marks)} marked; highest {_fmt(max(ys))}.</desc>",
    ]
    for t in _ticks(y_hi):
        y = sy(t)
        parts.append(
            f'<line x1="{left}" x2="{right}" y1="{y}" y2="{y}" stroke="#e3e6ee" />'
            f'<text x="{left - 6}" y="{y + 4}" font-size="11" text-anchor="end" '
            f'fill="#5b6475">{_fmt(t)}</text>'
        )
    for m in marks:
        x = sx(m.x)
        parts.append(
            f'<line class="mark" x1="{x}" x2="{x}" y1="{top}" y2="{bottom}" stroke="#a34a00" '
            f'stroke-dasharray="4 3"><title>{escape(m.label)}</title></line>'
        )
    parts.append(f'<path d="{path}" fill="none" stroke="#2456c8" stroke-width="2" />')
    for x, y in points:
        parts.append(f'<circle cx="{sx(x)}" cy="{sy(y)}" r="2.5" fill="#2456c8" />')
    parts.append(
        f'<text x="{(left + right) / 2}" y="{HEIGHT - 6}" font-size="12" text-anchor="middle" '
        f'fill="#5b6475">{escape(x_label)}</text>'
        f'<text x="12" y="{(top + bottom) / 2}" font-size="12" text-anchor="middle" '
        f'fill="#5b6475" transform="rotate(-90 12 {(top + bottom) / 2})">{escape(y_label)}</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(
    bars: Sequence[tuple[str, float]], *, title: str, y_label: str, chart_id: str = ""
) -> str:
    """One bar per (label, value), in the given order; "" when there are none. Labels are
    shown under every bar when there are few, under every n-th otherwise."""
    if not bars:
        return ""
    left, right = PAD_LEFT, WIDTH - PAD_RIGHT
    top, bottom = PAD_TOP, HEIGHT - PAD_BOTTOM
    y_hi = max(v for _, v in bars) * 1.1 or 1.0
    slot = (right - left) / len(bars)
    every = max(1, len(bars) // 10)
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'aria-labelledby="{chart_id}-t {chart_id}-d"'
        + (f' id="{escape(chart_id)}"' if chart_id else "")
        + f' data-bars="{len(bars)}">',
        f'<title id="{chart_id}-t">{escape(title)}</title>',
        f'<desc id="{chart_id}-d">{escape(y_label)}: '
        + ", ".join(f"{escape(label)} {_fmt(v)}" for label, v in bars[-31:])
        + "</desc>",
    ]
    for t in _ticks(y_hi):
        y = round(_scale(t, 0, y_hi, bottom, top), 1)
        parts.append(
            f'<line x1="{left}" x2="{right}" y1="{y}" y2="{y}" stroke="#e3e6ee" />'
            f'<text x="{left - 6}" y="{y + 4}" font-size="11" text-anchor="end" '
            f'fill="#5b6475">{_fmt(t)}</text>'
        )
    for i, (label, value) in enumerate(bars):
        x = left + i * slot + slot * 0.15
        y = round(_scale(value, 0, y_hi, bottom, top), 1)
        parts.append(
            f'<rect class="bar" x="{round(x, 1)}" y="{y}" width="{round(slot * 0.7, 1)}" '
            f'height="{round(bottom - y, 1)}" fill="#2456c8"><title>{escape(label)}: '
            f"{_fmt(value)}</title></rect>"
        )
        if i % every == 0:
            parts.append(
                f'<text x="{round(x + slot * 0.35, 1)}" y="{bottom + 14}" font-size="10" '
                f'text-anchor="middle" fill="#5b6475">{escape(label)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)
