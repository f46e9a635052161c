"""The default fit's EM work against a stated budget, and where its estimate ends.

Seconds flake on shared machines; the EM maps a fit spends do not: for a seed they are
deterministic (``info["work"]``: one start through the EM map once is one map). A
change that makes the default fit do several times the work it needs (a stopping rule
paid by every refined start, a stage that runs to its cap) fails here on any machine.

The budgets are about twice the maps measured when they were set, so rounding-level
changes of the kernels do not trip them, while the rule that ran every refined start to
SQUAREM-PMF's deep tolerance (about 110,000 refinement maps on UCI Car, where the
budget is 2,500) or EM's rule one start after another (about 12,800) would.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from bayespmf.datasets import load_car, load_votes
from bayespmf.fit import defaults
from bayespmf.fit.em import run_em
from bayespmf.fit.latent_class import fit_latent_class
from bayespmf.fit.multistart import EXPLORE_CYCLES
from bayespmf.fit.source import as_source
from bayespmf.fit.squarem import SQUAREM_PMF_TOL_SCALE
from bayespmf.pmf import stack_factors

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _lca_suite import made_case

#: case -> (loader of (data, rank), seed, budget of refinement + polish maps)
CASES = {
    "car": (lambda: (load_car()[0], 4), 5, 2500),
    "votes": (lambda: (load_votes()[0], 3), 5, 1200),
    "survey": (lambda: (made_case("sim-survey", 0).data, 3), 5, 7000),
    "binary": (lambda: (made_case("sim-binary", 4).data, 4), 5, 2000),
}

#: A batched SQUAREM-PMF cycle maps every start 3 times, 4 when an extrapolation fails.
MAX_MAPS_PER_CYCLE = 4


@pytest.fixture(scope="module", params=sorted(CASES))
def default_fit(request):
    load, seed, budget = CASES[request.param]
    data, n_components = load()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_latent_class(data, n_components, random_state=seed)
    return request.param, data, n_components, fit, budget


def test_default_fit_within_budget(default_fit):
    name, _, _, fit, budget = default_fit
    work = fit.info["work"]
    rounds = fit.info["rounds"]
    assert rounds == 1, f"{name}: the budget is for one round; {rounds} ran"
    assert work["explore"] <= defaults.DEFAULT_N_INIT * EXPLORE_CYCLES * MAX_MAPS_PER_CYCLE
    spent = work["refine"] + work["polish"]
    assert spent <= budget, f"{name}: refinement and polish spent {spent} maps"
    # the work is what the starts report: every refined start's maps are counted
    per_start = fit.info["refined_n_evals"]
    assert per_start.sum() <= spent


def test_default_fit_work_is_deterministic():
    load, seed, _ = CASES["votes"]
    data, n_components = load()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        works = [
            fit_latent_class(data, n_components, random_state=seed).info["work"]
            for _ in range(2)
        ]
    assert works[0] == works[1]


def test_estimate_ends_where_the_deep_rule_ends(default_fit):
    """The returned estimate is polished: SQUAREM-PMF's own rule gains nothing more."""
    _, data, n_components, fit, _ = default_fit
    tol = defaults.DEFAULT_TOL["auto"]
    kernel = as_source(data, None).em_kernel(n_components)
    n_cat = np.asarray(data.n_categories)
    w, a = fit.params.weights, stack_factors(fit.params.factors)
    _, more = run_em(
        kernel, w, a, n_cat, accelerate="squarem", max_iter=5000, tol=tol, warn=False
    )
    assert more.converged
    slack = 10 * SQUAREM_PMF_TOL_SCALE * tol * abs(fit.loglik)
    assert more.loglik - fit.loglik <= slack
    # and nothing was lost on the way: the estimate is at least what EM's rule gives
    _, em = run_em(kernel, w, a, n_cat, max_iter=5000, tol=tol, warn=False)
    assert fit.loglik >= em.loglik - slack


def test_polish_reaches_only_the_best(default_fit):
    """Starts far below the best are not polished: their maps end with stage one."""
    name, _, _, fit, _ = default_fit
    gap = fit.loglik - fit.info["refined_loglik"]
    polished = fit.info["refined_polished"]
    assert polished.any()
    assert not polished[gap > 2 * fit.info["polish_reach"]].any(), name


def _structureless(n_rows=4000, seed=0):
    """Rows drawn independently and uniformly: a nearly flat 2-class likelihood."""
    from bayespmf import CategoricalData

    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 12, size=(n_rows, 5), dtype=np.int16)
    codes[rng.random(codes.shape) < 0.3] = -1
    return CategoricalData(codes, n_categories=[12] * 5)


def test_polish_on_a_flat_likelihood_stops_at_its_budget_and_says_so(monkeypatch):
    from bayespmf.fit import multistart

    data = _structureless()
    monkeypatch.setattr(multistart, "POLISH_SHARE", 0.05)
    monkeypatch.setattr(multistart, "POLISH_MIN_MAPS", 100)
    with pytest.warns(Warning) as caught:
        fit = fit_latent_class(data, 2, n_init=30, random_state=0)
    work = fit.info["work"]
    budget = max(multistart.POLISH_SHARE * (work["explore"] + work["refine"]), 100)
    # a cycle starts only while CYCLE_MAPS maps remain; a backtracking one takes more
    assert work["polish"] <= budget + MAX_MAPS_PER_CYCLE + 5
    cut = fit.info["polish_cut"]
    assert cut is not None and not fit.converged
    assert cut["budget"] == pytest.approx(budget)
    assert cut["gain_to_come"] > cut["deep_bound"]
    messages = [str(w.message) for w in caught if "polish" in str(w.message)]
    assert len(messages) == 1 and "budget" in messages[0] and "n_init=1" in messages[0]
    # the advice carries it on: the given start alone, polished without a budget
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        more = fit_latent_class(data, 2, init=[fit.params], n_init=1)
    assert more.info["polish_cut"] is None and more.converged
    assert more.loglik > fit.loglik


def test_polish_budget_spares_a_fit_with_latent_structure():
    """On data with latent structure the budget never binds: nothing is cut."""
    data, n_components = load_votes()[0], 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_latent_class(data, n_components, random_state=5)
    work = fit.info["work"]
    assert fit.info["polish_cut"] is None and fit.converged
    assert work["polish"] < 0.1 * (work["explore"] + work["refine"])
