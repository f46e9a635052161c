import warnings

import numpy as np
import pytest

from bayespmf import ConvergenceWarning
from bayespmf.datasets import make_latent_class
from bayespmf.fit import StepInfo, fit_em, iterate
from bayespmf.fit.loop import predicted_gain


def test_predicted_gain_is_the_geometric_tail():
    # increments 1, 1/2, 1/4: rate 1/2, so 1/4 * (1/2) / (1/2) = 1/4 still to come
    assert predicted_gain([0.0, 1.0, 1.5, 1.75]) == pytest.approx(0.25)
    # the slower of the last two rates is used (conservative)
    assert predicted_gain([0.0, 1.0, 1.9, 2.17]) == pytest.approx(0.27 * 0.9 / 0.1)
    assert predicted_gain([0.0, 1.0, 2.0, 3.0]) == np.inf  # a plateau: no end in sight
    assert predicted_gain([0.0, 1.0, 2.0]) == np.inf  # too short to tell
    assert predicted_gain([-5.0, -5.0]) == 0.0  # nothing changes: converged


def test_iterate_stops_on_a_geometric_sequence_and_reports():
    # L_k = -2^-k: the remaining gain after L_k is 2^-k, below tol*1 after ~20 steps
    def step(k):
        return k + 1, StepInfo(-(2.0**-k))

    state, info = iterate(step, 0, max_iter=100, tol=1e-6)
    assert info.converged and not info.stopped
    assert 2.0 ** -(state - 1) <= 4e-6  # the promised tolerance holds at the stop
    assert info.n_iter == state


def test_iterate_warns_at_max_iter_and_stops_on_callback():
    def linear(k):  # a steady rise: never converges
        return k + 1, StepInfo(float(k))

    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=5"):
        _, info = iterate(linear, 0, max_iter=5, tol=1e-3)
    assert not info.converged
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, info = iterate(linear, 0, max_iter=50, tol=1e-3, callback=lambda i, s: i == 3)
    assert info.stopped and info.n_iter == 3


def test_plateau_that_the_old_rule_called_converged():
    # Binary items, rank 3: from this random start EM crawls along a plateau. The old
    # rule (relative change <= tol) stopped at an iterate 0.38 log-lik units (3e-4
    # relative) below where the same EM run ends; the new rule must not.
    data, _ = make_latent_class(300, [2] * 6, n_components=3, random_state=2)
    tol = 1e-7
    _, long = fit_em(data, 3, random_state=5, max_iter=20000, tol=0.0)
    trace = long.loglik_trace
    rel = np.abs(np.diff(trace)) <= tol * np.abs(trace[1:])
    old_stop = int(np.argmax(rel)) + 1
    assert long.loglik - trace[old_stop] > 1000 * tol * abs(long.loglik)  # the trap
    _, info = fit_em(data, 3, random_state=5, max_iter=20000, tol=tol)
    assert info.converged
    assert info.n_iter > old_stop
    assert long.loglik - info.loglik <= 10 * tol * abs(long.loglik)


@pytest.mark.parametrize("codes", [[[0, 1, 1]], [[0, 0], [1, 1], [0, 0], [1, 1]]])
def test_single_row_or_exact_fit_does_not_warn(codes):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, info = fit_em(
            np.array(codes),
            2,
            n_categories=[2] * len(codes[0]),
            random_state=0,
            max_iter=5000,
            tol=1e-8,
        )
    assert info.converged
