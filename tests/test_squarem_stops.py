"""SQUAREM-PMF stops where EM stops: same start, same ``tol``, same log-likelihood.

EM's stopping rule (the Aitken estimate of the gain still to come, from the last three
increments) trusted on SQUAREM-PMF's cycle log-likelihoods stopped SQUAREM-PMF short of
EM's end (``bayespmf.fit.squarem``, module docstring). The cases here are small
simulated data sets of the Table III kind (Chege et al.: N = 5, I = 10, R = 5, a
quarter of the entries hidden) on which it did, and on which EM and SQUAREM-PMF, both
polished to a tight tolerance, reach the same maximum: so any difference at the
working tolerance is where they stopped, not which maximum they found.
"""

from __future__ import annotations

import numpy as np
import pytest

from bayespmf.fit import fit_em
from bayespmf.fit.em import run_em
from bayespmf.fit.loop import iterate, predicted_gain
from bayespmf.fit.squarem import (
    SQUAREM_PMF_TOL_SCALE,
    squarem_pmf,
    squarem_pmf_converged,
    squarem_pmf_steps,
)
from bayespmf.kernels.em import EMState, build_em_kernel, init_random
from bayespmf.pmf import LatentClassParams, split_factors

N_VARS, N_CAT, RANK, OUTAGE, N_ROWS = 5, 10, 5, 0.25, 3000
N_CATS = [N_CAT] * N_VARS
TOL = 1e-7
#: The agreement asked for: relative to |L|.
SAME = 1e-6
#: Seeds of cases where EM's rule stopped SQUAREM-PMF more than SAME below EM.
SEEDS = [4, 9, 11]


def simulate(seed):
    """Table III's kind of data (Uniform(0, 1) truth, normalized) and a random start."""
    rng = np.random.default_rng(seed)
    lam = rng.random(RANK)
    lam /= lam.sum()
    factors = rng.random((N_VARS, N_CAT, RANK))
    factors /= factors.sum(axis=1, keepdims=True)
    z = rng.choice(RANK, size=N_ROWS, p=lam)
    cdf = np.cumsum(factors[:, :, z], axis=1)
    u = rng.random((N_VARS, 1, N_ROWS))
    codes = np.minimum((u > cdf).sum(axis=1), N_CAT - 1).T
    codes[rng.random(codes.shape) < OUTAGE] = -1
    start = init_random(N_CATS, RANK, random_state=rng)
    return codes, start


@pytest.fixture(scope="module", params=SEEDS)
def case(request):
    codes, start = simulate(request.param)
    kernel = build_em_kernel(codes, N_CATS, RANK)
    w0, a0 = start.weights, np.concatenate(start.factors, axis=0)
    em_params, em = run_em(kernel, w0, a0, N_CATS, max_iter=30_000, tol=TOL, warn=False)
    return codes, start, kernel, (w0, a0), em_params, em


def _loglik(kernel, state):
    return kernel.step(state.weights, state.factors_stacked)[2]


def test_case_has_one_maximum(case):
    """Precondition: EM's and SQUAREM-PMF's ends polish to the same maximum."""
    _, _, kernel, (w0, a0), em_params, _ = case
    ends = []
    for w, a in [(em_params.weights, np.concatenate(em_params.factors)), (w0, a0)]:
        state, info = squarem_pmf(kernel.step, w, a, N_CATS, max_iter=20_000, tol=1e-13)
        assert info.converged
        ends.append(_loglik(kernel, state))
    assert ends[1] == pytest.approx(ends[0], rel=1e-9)


def test_ems_rule_stopped_squarem_short(case):
    """The case exercises the fault: EM's rule on SQUAREM-PMF's cycles stops short."""
    _, _, kernel, (w0, a0), _, em = case
    state, info = iterate(
        squarem_pmf_steps(kernel.step, N_CATS),
        EMState(w0, a0, -np.inf),
        max_iter=10_000,
        tol=TOL,
        warn=False,
    )
    assert info.converged
    assert _loglik(kernel, state) < em.loglik - SAME * abs(em.loglik)


def test_squarem_pmf_reaches_em_loglik(case):
    _, _, kernel, (w0, a0), _, em = case
    state, info = squarem_pmf(kernel.step, w0, a0, N_CATS, max_iter=10_000, tol=TOL)
    assert em.converged and info.converged
    assert _loglik(kernel, state) == pytest.approx(em.loglik, rel=SAME)
    assert info.n_evals < em.n_evals  # and it is still the faster of the two
    np.testing.assert_array_equal(w0, case[1].weights)  # the start is not modified


def test_fit_em_squarem_reaches_em_loglik(case):
    """The public path: ``fit_em(accelerate="squarem")`` against ``fit_em``."""
    codes, start, *_ = case
    init = LatentClassParams(start.weights, list(start.factors))
    _, em = fit_em(codes, RANK, init=init, n_categories=N_CATS, max_iter=30_000, tol=TOL)
    _, sq = fit_em(
        codes,
        RANK,
        init=init,
        n_categories=N_CATS,
        accelerate="squarem",
        max_iter=10_000,
        tol=TOL,
    )
    assert em.converged and sq.converged
    assert sq.loglik == pytest.approx(em.loglik, rel=SAME)
    assert sq.n_evals < em.n_evals


def test_rule_is_ems_rule_deeper():
    # halving increments: the Aitken estimate says 0.25 is still to come
    trace = [-1000.0, -999.0, -998.5, -998.25]
    assert predicted_gain(trace) == pytest.approx(0.25)
    at = 1.01 * 0.25 / 998.25  # a tol at which EM's rule just holds
    assert predicted_gain(trace) <= at * 998.25
    assert not squarem_pmf_converged(trace, None, at)
    assert squarem_pmf_converged(trace, None, at / SQUAREM_PMF_TOL_SCALE)
    assert not squarem_pmf_converged(trace, None, 0.99 * at / SQUAREM_PMF_TOL_SCALE)
    # a change at rounding level ends the fit whatever the tolerance
    assert squarem_pmf_converged([-5.0, -4.0, -4.0], None, 0.0)


def test_squarem_pmf_returns_a_valid_pmf(case):
    _, _, kernel, (w0, a0), _, _ = case
    state, _ = squarem_pmf(kernel.step, w0, a0, N_CATS, max_iter=5, tol=0.0, warn=False)
    assert state.weights.sum() == pytest.approx(1.0)
    for block in split_factors(state.factors_stacked, N_CATS):
        np.testing.assert_allclose(block.sum(axis=0), 1.0)
        assert np.all(block >= 0)


def test_squarem_pmf_bad_arguments(case):
    _, _, kernel, (w0, a0), _, _ = case
    with pytest.raises(ValueError, match="'max_iter' parameter of squarem_pmf"):
        squarem_pmf(kernel.step, w0, a0, N_CATS, max_iter=0, tol=TOL)
    with pytest.raises(ValueError, match="'tol' parameter of squarem_pmf"):
        squarem_pmf(kernel.step, w0, a0, N_CATS, max_iter=10, tol=-1.0)
