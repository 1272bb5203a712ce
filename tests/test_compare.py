from __future__ import annotations

import math

import pytest
import torch

from kernelcraft.judge.worker.compare import compare_outputs, compare_tensors, within_tolerance


def test_every_element_is_compared_and_the_worst_is_located() -> None:
    ref = torch.randn(64, 64, dtype=torch.float64).float()
    got = ref.clone()
    got[17, 42] += 0.5
    m = compare_tensors(got, ref, 1e-4, 1e-4)
    assert not m.ok and m.bad == 1 and m.total == 64 * 64
    assert m.worst_index == [17, 42]
    assert math.isclose(m.max_abs, 0.5, rel_tol=1e-5)
    assert m.rel_l2 > 0
    assert "17, 42" in m.describe()


def test_tolerance_is_atol_plus_rtol_times_expected() -> None:
    ref = torch.full((10,), 100.0)
    assert compare_tensors(ref + 0.0099, ref, 1e-4, 1e-4).ok  # 1e-4 + 1e-2
    assert not compare_tensors(ref + 0.0102, ref, 1e-4, 1e-4).ok


def test_nan_and_inf() -> None:
    ref = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare_tensors(ref.clone(), ref, 1e-4, 1e-4).ok
    assert not compare_tensors(torch.tensor([float("nan"), float("nan"), float("inf")]), ref, 1e-4, 1e-4).ok
    assert not compare_tensors(torch.tensor([1.0, 0.0, float("inf")]), ref, 1e-4, 1e-4).ok


def test_shape_dtype_type_and_count_mismatches() -> None:
    a = torch.zeros(3)
    assert "shape" in compare_tensors(torch.zeros(4), a, 1, 1).reason
    assert "dtype" in compare_tensors(torch.zeros(3, dtype=torch.float64), a, 1, 1).reason
    assert "outputs" in compare_outputs([a, a], [a], 1, 1).reason

    class Sub(torch.Tensor):
        pass

    assert "torch.Tensor" in compare_outputs([a.as_subclass(Sub)], [a], 1, 1).reason


def test_large_tensors_are_compared_in_chunks() -> None:
    ref = torch.zeros((1 << 24) + 5)
    got = ref.clone()
    got[-1] = 1.0
    m = compare_tensors(got, ref, 1e-4, 1e-4)
    assert m.bad == 1 and m.worst_index == [(1 << 24) + 4]


@pytest.mark.parametrize(("got", "expected"), [
    (float("nan"), float("nan")), (float("inf"), float("inf")), (-float("inf"), float("inf")), (1.0, float("nan")),
    (float("nan"), 1.0), (1.0002, 1.0), (1.0001, 1.0), (5.0, float("inf")), (0.0, 1e-4), (100.0099, 100.0), (100.0102, 100.0),
])
def test_the_quick_yes_of_a_spot_check_agrees_with_the_full_comparison(got: float, expected: float) -> None:
    g, e = torch.tensor([got, 0.5]), torch.tensor([expected, 0.5])
    assert within_tolerance(g, e, 1e-4, 1e-4) == compare_tensors(g, e, 1e-4, 1e-4).ok
    assert within_tolerance(g.half(), e.half(), 1e-2, 1e-2) == compare_tensors(g.half(), e.half(), 1e-2, 1e-2).ok
    assert not within_tolerance(g, e.double(), 1e-4, 1e-4) and not within_tolerance(g, e[:1], 1e-4, 1e-4)
