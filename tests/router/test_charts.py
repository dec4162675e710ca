"""Chart geometry for the statistics page."""

from __future__ import annotations

from booku_memory.router.charts import horizontal_bars, month_series, vertical_bars


def test_horizontal_bars_scale_to_the_largest_value():
    chart = horizontal_bars([("人物", 4), ("事件", 2), ("地点", 0)], width=500, label_width=100, value_width=50)
    lengths = [bar.width for bar in chart.bars]
    assert lengths == [350.0, 175.0, 0.0]
    assert chart.bars[1].y > chart.bars[0].y + chart.bars[0].height
    assert chart.height >= chart.bars[-1].y + chart.bars[-1].height


def test_vertical_bars_stand_on_the_baseline():
    chart = vertical_bars([("2024-01", 3), ("2024-02", 6)], plot_height=120)
    for bar in chart.bars:
        assert abs(bar.y + bar.height - chart.baseline) < 0.01
    assert chart.bars[1].height == 120.0 and chart.bars[0].height == 60.0


def test_empty_chart_has_no_bars_and_no_division_by_zero():
    assert horizontal_bars([]).bars == ()
    assert vertical_bars([("2024-01", 0)]).bars[0].height == 0.0


def test_month_series_fills_gaps_and_keeps_the_latest():
    series = month_series({"2023-11": 2, "2024-02": 5, "bogus": 9})
    assert series == [("2023-11", 2), ("2023-12", 0), ("2024-01", 0), ("2024-02", 5)]
    assert len(month_series({"2020-01": 1, "2024-12": 1}, limit=6)) == 6
    assert month_series({}) == []
