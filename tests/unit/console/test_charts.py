"""The console's SVG charts (pure functions)."""

from __future__ import annotations

from app.console.charts import Mark, _ticks, bar_chart, line_chart


def test_gridlines_are_round_numbers() -> None:
    assert _ticks(3.3) == [0, 1, 2, 3]
    assert _ticks(1065) == [0, 500, 1000]
    assert _ticks(0) == [0.0]


def test_line_chart_draws_points_and_marks_and_escapes_text() -> None:
    svg = line_chart(
        [(1, 10), (2, 30), (3, 5)],
        title="<b>tokens</b>",
        x_label="turn",
        y_label="tokens",
        marks=[Mark(2.5, "compression <1>")],
        chart_id="c",
    )
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert 'data-points="3"' in svg and 'data-marks="1"' in svg
    assert svg.count("<circle") == 3 and svg.count('class="mark"') == 1
    assert "<b>" not in svg and "&lt;b&gt;tokens&lt;/b&gt;" in svg
    assert "compression &lt;1&gt;" in svg
    assert line_chart([], title="t", x_label="x", y_label="y") == ""


def test_bar_chart_has_one_bar_per_value() -> None:
    bars = [(f"12-{d:02d}", float(d % 3)) for d in range(1, 31)]
    svg = bar_chart(bars, title="facts", y_label="facts per day", chart_id="f")
    assert 'data-bars="30"' in svg and svg.count('class="bar"') == 30
    assert bar_chart([], title="t", y_label="y") == ""


def test_the_token_chart_takes_the_context_the_model_counted() -> None:
    """A bucket with a turn the model counted ends at that count (the estimate before it
    corrected); a bucket with a compression keeps the compression's recorded drop."""
    from app.console.charts import _fmt
    from app.console.session_page import token_chart

    estimated = token_chart([(0, 100, None), (1, 50, None), (2, 30, None)], [], 0)
    assert f"highest {_fmt(180)}." in estimated
    measured = token_chart([(0, 100, None), (1, 50, 4000), (2, 30, None)], [], 0)
    assert f"highest {_fmt(4030)}." in measured and 'data-points="3"' in measured
