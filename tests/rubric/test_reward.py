"""rubric_reward, pass_rates, varies and discriminative_mass against hand-written loops."""

import math

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings

from harnessrl_jax.rubric.reward import LAMBDA, discriminative_mass, pass_rates, rubric_reward, varies


def reward_loop(points, S, scale=100.0):
    """Reference: the formula term by term, skipping NaN cells per response."""
    out = []
    for j in range(len(S[0])):
        num = den = 0.0
        for k, p in enumerate(points):
            if math.isnan(S[k][j]):
                continue
            num += p * S[k][j]
            den += max(p, 0.0)
        out.append(scale * num / den if den > 0 else math.nan)
    return out


@st.composite
def groups(draw, nan=True):
    k = draw(st.integers(1, 7))
    j = draw(st.integers(1, 9))
    points = draw(hnp.arrays(np.float64, k, elements=st.sampled_from([-5.0, -2.0, -1.0, 0.5, 1.0, 3.0, 7.0, 10.0])))
    cells = [0.0, 1.0, math.nan] if nan else [0.0, 1.0]
    S = draw(hnp.arrays(np.float64, (k, j), elements=st.sampled_from(cells)))
    return points, S


@settings(max_examples=300, deadline=None)
@given(groups())
def test_reward_matches_loop(group):
    points, S = group
    np.testing.assert_allclose(rubric_reward(points, S), reward_loop(points.tolist(), S.tolist()), rtol=1e-12)


@settings(max_examples=50, deadline=None)
@given(groups(), st.floats(0.5, 1000.0))
def test_scale_multiplies_reward(group, scale):
    points, S = group
    np.testing.assert_allclose(rubric_reward(points, S, scale=scale), reward_loop(points.tolist(), S.tolist(), scale))


def test_default_scale_is_100_points():
    assert LAMBDA == 100.0
    points = np.array([3.0, 1.0])
    S = np.array([[1, 1, 0, 0], [1, 0, 1, 0]])
    np.testing.assert_allclose(rubric_reward(points, S), [100.0, 75.0, 25.0, 0.0])


def test_negative_points_penalise_but_do_not_enter_denominator():
    points = np.array([4.0, -2.0])
    S = np.array([[1, 1, 0], [0, 1, 1]])
    # denominator is 4 (max(-2, 0) = 0), so meeting the pitfall costs 50 points and can go below zero
    np.testing.assert_allclose(rubric_reward(points, S), [100.0, 50.0, -50.0])


def test_nan_cell_drops_that_criterion_for_that_response_only():
    points = np.array([2.0, 2.0, -1.0])
    S = np.array([[1, 1], [np.nan, 0], [np.nan, 1]])
    # response 0: only criterion 0 judged -> 2/2; response 1: (2 + 0 - 1) / 4
    np.testing.assert_allclose(rubric_reward(points, S), [100.0, 25.0])


def test_response_without_valid_positive_criterion_is_nan():
    points = np.array([2.0, -1.0])
    S = np.array([[np.nan, 1], [1, 0]])
    r = rubric_reward(points, S)
    assert np.isnan(r[0]) and r[1] == 100.0


def test_bool_and_int_matrices_accepted():
    points = [1, 2]
    np.testing.assert_allclose(rubric_reward(points, [[True, False], [True, True]]), [100.0, 200 / 3])


@pytest.mark.parametrize("points, S", [
    (np.ones(3), np.ones((2, 4))),          # K mismatch
    (np.ones((3, 1)), np.ones((3, 4))),     # points not 1-d
    (np.ones(3), np.ones(3)),               # S not 2-d
])
def test_shape_errors(points, S):
    with pytest.raises(ValueError, match="expected points"):
        rubric_reward(points, S)


def test_scores_outside_0_1_rejected():
    with pytest.raises(ValueError, match="0, 1 or NaN"):
        rubric_reward(np.ones(2), np.array([[1.0, 0.5], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="finite"):
        rubric_reward(np.array([1.0, np.nan]), np.ones((2, 2)))


@settings(max_examples=30, deadline=None)
@given(groups())
def test_jax_inputs_match_numpy_and_jit(group):
    points, S = group
    want = rubric_reward(points, S)
    got = rubric_reward(jnp.asarray(points), jnp.asarray(S))
    jitted = jax.jit(rubric_reward)(jnp.asarray(points), jnp.asarray(S))
    assert isinstance(got, jax.Array)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(jitted), want, rtol=1e-5)


def test_jax_gradient_is_finite_with_nan_response():
    S = jnp.array([[jnp.nan, 1.0], [1.0, 0.0]])
    g = jax.grad(lambda p: jnp.nansum(rubric_reward(p, S)))(jnp.array([2.0, -1.0]))
    assert np.all(np.isfinite(np.asarray(g)))


@settings(max_examples=200, deadline=None)
@given(groups())
def test_pass_rates_and_varies_match_loop(group):
    _, S = group
    rates, split = pass_rates(S), varies(S)
    for k, row in enumerate(S.tolist()):
        vals = [v for v in row if not math.isnan(v)]
        if vals:
            assert rates[k] == pytest.approx(sum(vals) / len(vals))
        else:
            assert np.isnan(rates[k])
        assert bool(split[k]) == (0.0 in vals and 1.0 in vals)


@settings(max_examples=200, deadline=None)
@given(groups(), st.booleans())
def test_discriminative_mass_matches_loop(group, weighted):
    points, S = group
    num = den = 0.0
    for p, row in zip(points.tolist(), S.tolist()):
        vals = [v for v in row if not math.isnan(v)]
        if not vals:
            continue
        w = max(p, 0.0) if weighted else 1.0
        den += w
        num += w * (0.0 in vals and 1.0 in vals)
    got = discriminative_mass(points, S, weighted=weighted)
    assert isinstance(got, float)
    if den > 0:
        assert got == pytest.approx(num / den)
    else:
        assert math.isnan(got)


def test_discriminative_mass_examples():
    points = np.array([5.0, 1.0, 2.0, -3.0])
    S = np.array([[1, 1, 1, 1],      # saturated
                  [0, 1, 0, 1],      # splits the group
                  [0, 0, 0, 0],      # blind
                  [1, 0, 0, 0]])     # pitfall that splits the group
    assert discriminative_mass(points, S) == pytest.approx(2 / 4)
    assert discriminative_mass(points, S, weighted=True) == pytest.approx(1 / 8)
    np.testing.assert_array_equal(varies(S), [False, True, False, True])
    np.testing.assert_allclose(pass_rates(S), [1.0, 0.5, 0.0, 0.25])
    assert float(discriminative_mass(jnp.asarray(points), jnp.asarray(S))) == pytest.approx(0.5)
