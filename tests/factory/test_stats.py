from mashbill.factory.stats import percentiles


def test_nearest_rank_figures_are_values_that_occurred():
    values = [7, 1, 9, 3, 5, 100]
    pct = percentiles(values, (50, 90, 99))
    assert pct["n"] == 6 and pct["min"] == 1 and pct["max"] == 100
    assert all(pct[k] in values for k in ("p50", "p90", "p99"))
    assert pct["p50"] <= pct["p90"] <= pct["p99"] <= pct["max"]
    assert pct["mean"] == round(sum(values) / 6, 4)


def test_empty_gives_none_not_zero():
    pct = percentiles([])
    assert pct["n"] == 0 and pct["p50"] is None and pct["max"] is None
