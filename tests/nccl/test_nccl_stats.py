import math

import pytest

from specserve.nccl.stats import (
    algbw_gbps,
    busbw_factor,
    busbw_gbps,
    per_iteration_max,
    percentile,
    speedup,
    summarize,
)


@pytest.mark.parametrize(("n", "factor"), [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_busbw_factor_is_nccl_tests_all_reduce_factor(n, factor):
    assert busbw_factor(n) == pytest.approx(factor)


def test_bandwidths_in_gb_per_s():
    # 1 GB in 0.5 s: algbw 2 GB/s; on 8 ranks each link carries 2 * 7/8 of it.
    assert algbw_gbps(10**9, 0.5) == pytest.approx(2.0)
    assert busbw_gbps(10**9, 0.5, 8) == pytest.approx(3.5)
    with pytest.raises(ValueError, match="must be positive"):
        algbw_gbps(1, 0.0)


def test_percentile_interpolates_like_numpy_linear():
    values = [10.0, 1.0, 4.0, 3.0, 2.0]  # sorted: 1 2 3 4 10
    assert percentile(values, 50) == 3.0
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 10.0
    assert percentile(values, 90) == pytest.approx(4 + 0.6 * 6)  # pos 3.6
    assert percentile(list(range(1, 101)), 99) == pytest.approx(99.01)


def test_iteration_time_is_the_slowest_rank():
    assert per_iteration_max([[1.0, 5.0, 2.0], [3.0, 1.0, 2.5]]) == [3.0, 5.0, 2.5]
    with pytest.raises(ValueError, match="different iteration counts"):
        per_iteration_max([[1.0, 2.0], [1.0]])


def test_summarize_uses_median_for_bandwidth():
    rank0 = [10.0, 20.0, 30.0, 40.0, 1000.0]
    rank1 = [12.0, 18.0, 30.0, 41.0, 900.0]
    stats = summarize([rank0, rank1], nbytes=30_000, world_size=2)
    assert stats.median_us == 30.0
    assert stats.min_us == 12.0
    assert stats.mean_us == pytest.approx((12 + 20 + 30 + 41 + 1000) / 5)
    assert stats.p99_us == pytest.approx(41 + 0.96 * (1000 - 41))
    assert stats.algbw_gbps == pytest.approx(30_000 / 30e-6 / 1e9)  # 1.0 GB/s
    assert stats.busbw_gbps == pytest.approx(stats.algbw_gbps)  # factor 1 at n=2


def test_summarize_rejects_impossible_times():
    with pytest.raises(ValueError, match="non-positive or non-finite"):
        summarize([[1.0, math.inf]], 8, 2)
    with pytest.raises(ValueError, match="non-positive"):
        summarize([[0.0, 1.0]], 8, 2)


def test_speedup_is_default_over_preset():
    assert speedup(100.0, 50.0) == 2.0
    assert speedup(100.0, 200.0) == 0.5
    assert speedup(None, 50.0) is None
    assert speedup(100.0, None) is None
