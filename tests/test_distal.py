"""Distal outcomes and class predictors after a latent-class fit (bayespmf.fit.distal).

Reference values come from independent computations: the classification-error
matrix and the BCH weights row by row, the ML three-step and two-step likelihoods
maximized by scipy's optimizer, scikit-learn's multinomial logit for the naive
class predictors, the textbook standard error of a mean, and simulated truths.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp
from scipy.stats import norm

from bayespmf.fit import class_predictors, distal_outcome
from bayespmf.fit.distal import classification_error

# a tiny measurement model: 2 classes, 2 binary items, 3-category third item
WEIGHTS = np.array([0.4, 0.6])
FACTORS = [
    np.array([[0.8, 0.3], [0.2, 0.7]]),
    np.array([[0.7, 0.2], [0.3, 0.8]]),
    np.array([[0.6, 0.1], [0.3, 0.3], [0.1, 0.6]]),
]


def simulate(n_rows, rng, *, means=(0.0, 1.0), weights=WEIGHTS, factors=FACTORS):
    """Rows, classes and a gaussian outcome from the tiny model."""
    h = rng.choice(len(weights), n_rows, p=weights)
    x = np.stack(
        [(a[:, h].cumsum(axis=0) > rng.random(n_rows)).argmax(axis=0) for a in factors],
        axis=1,
    )
    y = rng.normal(np.asarray(means)[h], 1.0)
    return x, h, y


def simulate_logit(n_rows, rng, *, intercept, slope=1.0):
    """Rows whose class is a logit of a covariate z: (x, z, classes)."""
    z = rng.normal(size=n_rows)
    h = (rng.random(n_rows) < 1 / (1 + np.exp(-(intercept + slope * z)))).astype(int)
    x = np.stack(
        [(a[:, h].cumsum(axis=0) > rng.random(n_rows)).argmax(axis=0) for a in FACTORS],
        axis=1,
    )
    return x, z, h


def posterior_by_hand(x, weights, factors):
    """Pr(X = t | x_i), row by row."""
    post = np.empty((x.shape[0], weights.size))
    for i, row in enumerate(x):
        p = weights.copy()
        for n, code in enumerate(row):
            if code >= 0:
                p = p * factors[n][code]
        post[i] = p / p.sum()
    return post


def d_by_hand(post):
    """D[t, s] = sum_i post_it [W_i = s] / sum_i post_it (Vermunt 2010, eq. 6)."""
    n_cls = post.shape[1]
    modal = post.argmax(axis=1)
    d = np.zeros((n_cls, n_cls))
    for t in range(n_cls):
        for s in range(n_cls):
            d[t, s] = post[modal == s, t].sum() / post[:, t].sum()
    return modal, d


@pytest.fixture
def tiny(rng):
    x, _, y = simulate(60, rng)
    return x, y


def test_classification_error_matches_hand_computation(tiny):
    x, _ = tiny
    post = posterior_by_hand(x, WEIGHTS, FACTORS)
    modal, d = classification_error(post)
    modal_ref, d_ref = d_by_hand(post)
    np.testing.assert_array_equal(modal, modal_ref)
    np.testing.assert_allclose(d, d_ref, rtol=1e-12)
    np.testing.assert_allclose(d.sum(axis=1), 1.0)


def test_bch_means_and_variances_match_hand_computation(tiny):
    x, y = tiny
    modal, d = d_by_hand(posterior_by_hand(x, WEIGHTS, FACTORS))
    dinv = np.linalg.inv(d)
    fit = distal_outcome((WEIGHTS, FACTORS), x, y, "gaussian", correction="bch")
    for t in range(2):
        w = np.array([dinv[modal[i], t] for i in range(y.size)])
        mean = np.sum(w * y) / np.sum(w)
        var = np.sum(w * (y - mean) ** 2) / np.sum(w)
        assert fit.estimates.loc[t, "mean"] == pytest.approx(mean, rel=1e-12)
        assert fit.estimates.loc[t, "variance"] == pytest.approx(var, rel=1e-12)


def test_naive_estimate_and_its_standard_error_are_the_textbook_ones(tiny):
    x, y = tiny
    modal = posterior_by_hand(x, WEIGHTS, FACTORS).argmax(axis=1)
    fit = distal_outcome((WEIGHTS, FACTORS), x, y, "gaussian", correction="none")
    for t in range(2):
        yt = y[modal == t]
        assert fit.estimates.loc[t, "mean"] == pytest.approx(yt.mean(), rel=1e-12)
        # the sandwich SE of a mean: sqrt(sum (y - ybar)^2) / n (the classification
        # held fixed; the reported SE adds the measurement model's uncertainty)
        se = np.sqrt(np.sum((yt - yt.mean()) ** 2)) / yt.size
        cond = fit.info["stderr_conditional"]
        assert cond.loc[t, "mean"] == pytest.approx(se, rel=1e-5)
        assert fit.stderr.loc[t, "mean"] >= cond.loc[t, "mean"]


def _ml_by_scipy(fixed_log, y, n_cls=2):
    """Maximize sum_i log sum_t pi_t G_it N(y_i | mu_t, v_t) with scipy."""

    def nll(p):
        logit = np.r_[0.0, p[: n_cls - 1]]
        log_pi = logit - logsumexp(logit)
        mu, log_v = p[n_cls - 1 : 2 * n_cls - 1], p[2 * n_cls - 1 :]
        lf = norm.logpdf(y[:, None], mu, np.exp(0.5 * log_v))
        return -logsumexp(log_pi + fixed_log + lf, axis=1).sum()

    p0 = np.r_[np.zeros(n_cls - 1), np.linspace(-0.5, 1.5, n_cls), np.zeros(n_cls)]
    res = minimize(nll, p0, method="BFGS", options={"gtol": 1e-9})
    return res.x[n_cls - 1 : 2 * n_cls - 1], np.exp(res.x[2 * n_cls - 1 :]), -res.fun


def test_ml_three_step_maximizes_its_likelihood_as_scipy_does(rng):
    x, _, y = simulate(400, rng)
    modal, d = d_by_hand(posterior_by_hand(x, WEIGHTS, FACTORS))
    fixed_log = np.log(d.T[modal])  # log D[t, W_i]
    mu, var, loglik = _ml_by_scipy(fixed_log, y)
    fit = distal_outcome((WEIGHTS, FACTORS), x, y, "gaussian", correction="ml")
    np.testing.assert_allclose(fit.estimates["mean"], mu, atol=2e-5)
    np.testing.assert_allclose(fit.estimates["variance"], var, atol=2e-5)
    assert fit.loglik == pytest.approx(loglik, abs=1e-6)
    assert fit.converged


def test_two_step_maximizes_the_full_indicator_likelihood(rng):
    x, _, y = simulate(400, rng)
    log_x = (
        np.log(posterior_by_hand(x, np.ones(2), FACTORS))
        + np.log(np.prod([a[x[:, n]] for n, a in enumerate(FACTORS)], axis=0).sum(axis=1))[
            :, None
        ]
    )
    mu, var, loglik = _ml_by_scipy(log_x, y)
    fit = distal_outcome((WEIGHTS, FACTORS), x, y, "gaussian", correction="two-step")
    np.testing.assert_allclose(fit.estimates["mean"], mu, atol=2e-5)
    np.testing.assert_allclose(fit.estimates["variance"], var, atol=2e-5)
    assert fit.loglik == pytest.approx(loglik, abs=1e-6)


def test_ml_standard_errors_are_the_inverse_hessian(rng):
    x, _, y = simulate(400, rng)
    fit = distal_outcome((WEIGHTS, FACTORS), x, y, "gaussian", correction="ml")
    modal, d = d_by_hand(posterior_by_hand(x, WEIGHTS, FACTORS))
    fixed_log = np.log(d.T[modal])
    pi = fit.weights
    theta = fit.estimates.to_numpy()

    def loglik(mu):
        lf = norm.logpdf(y[:, None], mu, np.sqrt(theta[:, 1]))
        return logsumexp(np.log(pi) + fixed_log + lf, axis=1).sum()

    # the information in the means alone is a lower bound on the joint one; the
    # joint inverse is at least as large: check the means' curvature is consistent
    h = 1e-4
    hess = np.empty((2, 2))
    for j in range(2):
        for k in range(2):
            e_j, e_k = np.eye(2)[j] * h, np.eye(2)[k] * h
            m = theta[:, 0]
            hess[j, k] = (
                loglik(m + e_j + e_k)
                - loglik(m + e_j - e_k)
                - loglik(m - e_j + e_k)
                + loglik(m - e_j - e_k)
            ) / (4 * h * h)
    se_means_only = np.sqrt(np.diag(np.linalg.inv(-hess)))
    se = fit.info["stderr_conditional"]["mean"].to_numpy()  # D treated as known
    assert np.all(se >= se_means_only * (1 - 1e-4))
    assert np.all(se < 2 * se_means_only)


@pytest.mark.parametrize("correction", ["bch", "ml", "two-step", "one-step"])
def test_recovery_of_class_means(correction):
    rng = np.random.default_rng(3)
    x, _, y = simulate(3000, rng, means=(0.0, 1.0))
    fit = distal_outcome((WEIGHTS, FACTORS), x, y, "gaussian", correction=correction)
    z = (fit.estimates["mean"].to_numpy() - [0.0, 1.0]) / fit.stderr["mean"].to_numpy()
    assert np.all(np.abs(z) < 4), z
    assert fit.wald.loc[fit.wald["test"] == "overall", "p_value"].item() < 1e-6


def test_naive_estimator_is_attenuated_and_the_corrections_are_not():
    # weakly separated classes: the modal assignment mixes them, the naive class
    # means are pulled towards each other; averaged over replications
    weak = [np.array([[0.65, 0.35], [0.35, 0.65]])] * 4
    bias = {c: [] for c in ("none", "bch", "ml", "two-step")}
    rng = np.random.default_rng(5)
    for _ in range(8):
        x, _, y = simulate(
            1500, rng, means=(0.0, 1.0), weights=np.array([0.5, 0.5]), factors=weak
        )
        for c in bias:
            fit = distal_outcome(([0.5, 0.5], weak), x, y, "gaussian", correction=c)
            diff = fit.estimates.loc[1, "mean"] - fit.estimates.loc[0, "mean"]
            bias[c].append(diff - 1.0)
    mean_bias = {c: float(np.mean(b)) for c, b in bias.items()}
    assert mean_bias["none"] < -0.3  # attenuated towards no difference
    for c in ("bch", "ml", "two-step"):
        assert abs(mean_bias[c]) < abs(mean_bias["none"]) / 3, mean_bias


@pytest.mark.parametrize(
    ("family", "make", "truth"),
    [
        ("bernoulli", lambda h, r: r.random(h.size) < np.array([0.2, 0.7])[h], [0.2, 0.7]),
        ("poisson", lambda h, r: r.poisson(np.array([1.0, 3.0])[h]), [1.0, 3.0]),
    ],
)
@pytest.mark.parametrize("correction", ["bch", "ml", "two-step"])
def test_discrete_families_recover_class_means(family, make, truth, correction):
    rng = np.random.default_rng(11)
    x, h, _ = simulate(3000, rng)
    y = make(h, rng).astype(float)
    y[:100] = np.nan  # missing outcomes are dropped
    fit = distal_outcome((WEIGHTS, FACTORS), x, y, family, correction=correction)
    assert fit.n_rows == 2900
    z = (fit.estimates["mean"].to_numpy() - truth) / fit.stderr["mean"].to_numpy()
    assert np.all(np.abs(z) < 4), z


def test_categorical_outcome_with_labels(rng):
    x, h, _ = simulate(3000, np.random.default_rng(2))
    p = np.array([[0.6, 0.3, 0.1], [0.1, 0.3, 0.6]])
    codes = (p[h].cumsum(axis=1) > rng.random((h.size, 1))).argmax(axis=1)
    y = pd.Series(np.array(["lo", "mid", "hi"], dtype=object)[codes])
    y[:5] = None
    fit = distal_outcome((WEIGHTS, FACTORS), x, y, "categorical", correction="ml")
    assert list(fit.estimates.columns) == ["hi", "lo", "mid"]  # sorted labels
    truth = p[:, [2, 0, 1]]
    z = (fit.estimates.to_numpy() - truth) / fit.stderr.to_numpy()
    assert np.all(np.abs(z) < 4), z
    np.testing.assert_allclose(fit.estimates.sum(axis=1), 1.0)
    assert fit.wald.loc[0, "df"] == 2


def test_wald_overall_test_matches_the_formula(tiny):
    x, y = tiny
    fit = distal_outcome((WEIGHTS, FACTORS), x, y, "gaussian", correction="bch")
    m = fit.estimates["mean"].to_numpy()
    var = fit.covariance[np.ix_([0, 2], [0, 2])]
    c = np.array([1.0, -1.0])
    stat = (c @ m) ** 2 / (c @ var @ c)
    assert fit.wald.loc[0, "statistic"] == pytest.approx(stat, rel=1e-10)
    assert fit.wald.loc[1, "statistic"] == pytest.approx(stat, rel=1e-10)  # 0 vs 1


def test_naive_class_predictors_match_sklearn(rng):
    from sklearn.linear_model import LogisticRegression

    x, h, _ = simulate(500, rng)
    z = rng.normal(size=(500, 2)) + h[:, None]
    fit = class_predictors((WEIGHTS, FACTORS), x, z, correction="none")
    modal = posterior_by_hand(x, WEIGHTS, FACTORS).argmax(axis=1)
    lr = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10000).fit(z, modal)
    # sklearn's binary logit: log odds of class 1 against 0
    np.testing.assert_allclose(
        fit.estimates.loc["(intercept)", 1], lr.intercept_[0], atol=1e-5
    )
    np.testing.assert_allclose(fit.estimates.loc[["z0", "z1"], 1], lr.coef_[0], atol=1e-5)


@pytest.mark.parametrize("correction", ["bch", "ml", "two-step"])
def test_class_predictors_recover_the_logit(correction):
    rng = np.random.default_rng(7)
    x, z, _ = simulate_logit(4000, rng, intercept=0.3)
    fit = class_predictors((WEIGHTS, FACTORS), x, z, correction=correction)
    est = fit.estimates[1].to_numpy()
    se = fit.stderr[1].to_numpy()
    assert np.all(np.abs(est - [0.3, 1.0]) < 4 * se), (est, se)
    assert (
        fit.wald.query("parameter == 'z0' and test == 'overall'")["p_value"].item() < 1e-6
    )


def test_estimator_input_and_one_step(rng):
    from bayespmf.estimators import LatentClassPMF

    x, _, y = simulate(800, np.random.default_rng(4))
    model = LatentClassPMF(2, n_init=5, random_state=0).fit(x)
    fit = distal_outcome(model, x, y, "gaussian", correction="one-step")
    assert fit.converged and len(fit.info["factors"]) == 3
    two = distal_outcome(model, x, y, "gaussian", correction="two-step")
    # the one-step estimate has the higher joint likelihood of indicators and outcome
    assert fit.loglik >= two.loglik - 1e-8


def test_refusals(tiny):
    x, y = tiny
    params = (WEIGHTS, FACTORS)
    with pytest.raises(ValueError, match="'y' parameter of distal_outcome must hold one"):
        distal_outcome(params, x, y[:-1])
    with pytest.raises(ValueError, match=r"'family' parameter .* Did you mean 'poisson'"):
        distal_outcome(params, x, y, family="poison")
    with pytest.raises(ValueError, match=r"missing \(NaN\) on every row"):
        distal_outcome(params, x, np.full(y.size, np.nan))
    with pytest.raises(ValueError, match="'correction' parameter"):
        distal_outcome(params, x, y, correction="bhc")
    with pytest.raises(ValueError, match="must be 0 or 1 for family 'bernoulli'"):
        distal_outcome(params, x, y, family="bernoulli")
    with pytest.raises(ValueError, match="non-negative integer counts"):
        distal_outcome(params, x, y, family="poisson")
    with pytest.raises(ValueError, match="must be a fitted LatentClassPMF"):
        distal_outcome(object(), x, y)
    with pytest.raises(ValueError, match="'covariates' parameter of class_predictors"):
        class_predictors(params, x, np.ones((3, 1)))


def test_inputs_are_not_mutated(tiny):
    x, y = tiny
    x0, y0 = x.copy(), y.copy()
    distal_outcome((WEIGHTS, FACTORS), x, y, correction="one-step")
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)


@pytest.mark.parametrize("correction", ["bch", "ml", "two-step"])
def test_outcome_and_covariates_together(correction):
    rng = np.random.default_rng(9)
    x, z, h = simulate_logit(4000, rng, intercept=0.2)
    y = rng.normal(np.array([0.0, 1.0])[h], 1.0)
    fit = distal_outcome((WEIGHTS, FACTORS), x, y, covariates=z, correction=correction)
    zt = (fit.estimates["mean"].to_numpy() - [0.0, 1.0]) / fit.stderr["mean"].to_numpy()
    assert np.all(np.abs(zt) < 4), zt
    coef, se = fit.info["coef"][1].to_numpy(), fit.info["coef_stderr"][1].to_numpy()
    assert np.all(np.abs(coef - [0.2, 1.0]) < 4 * se), (coef, se)
    assert fit.weights.sum() == pytest.approx(1.0)


def test_other_packages_spellings_of_the_corrections(tiny):
    x, y = tiny
    params = (WEIGHTS, FACTORS)
    for alias, name in [
        (None, "none"),
        ("BCH", "bch"),
        ("ML", "ml"),
        ("two_step", "two-step"),
    ]:
        fit = distal_outcome(params, x, y, correction=alias)
        assert fit.correction == name


def test_two_step_standard_errors_add_the_first_steps_uncertainty(rng):
    """Bakk & Kuha's V2 = V_cond + J Sigma1 J' with J = d theta2 / d theta1 by refitting."""
    from bayespmf.estimators import LatentClassPMF
    from bayespmf.fit.distal import _indicator_components, _information, _inverse
    from bayespmf.kernels.distal import StructuralState

    x, _, y = simulate(1000, rng)
    model = LatentClassPMF(2, n_init=5, random_state=0).fit(x)  # the MLE
    weights, factors = model.weights_, model.factors_
    fit = distal_outcome(model, x, y, "gaussian", correction="two-step")
    # the measurement model's information, in its free coordinates (weights first)
    ind, _ = _indicator_components(x, factors)
    state1 = StructuralState(weights, None, tuple(c.theta for c in ind))
    info1, _, blocks1 = _information(
        state1, ind, np.zeros((x.shape[0], 2)), None, resp=None, fixed_weights=False
    )
    sigma = _inverse(info1)
    n_w = blocks1[0][1].shape[1]
    sigma1 = sigma[n_w:, n_w:]  # the indicators' probabilities (the weights are free)
    # d(means)/d(indicator coordinates) by central differences of refitted estimates
    cols, h = [], 1e-5
    for flat, jmap, _ in blocks1[1:]:
        for j in range(jmap.shape[1]):
            est = []
            for sign in (1, -1):
                pert = [a.copy() for a in factors]
                n = next(i for i, b in enumerate(blocks1[1:]) if b[0] is flat)
                pert[n] = (flat + sign * h * jmap[:, j]).reshape(2, -1).T
                f = distal_outcome(
                    (WEIGHTS, pert), x, y, "gaussian", correction="two-step", stderr=False
                )
                est.append(f.estimates["mean"].to_numpy())
            cols.append((est[0] - est[1]) / (2 * h))
    jac = np.array(cols).T  # (2 means, free indicator coordinates)
    var = fit.info["stderr_conditional"]["mean"].to_numpy() ** 2 + np.diag(
        jac @ sigma1 @ jac.T
    )
    np.testing.assert_allclose(fit.stderr["mean"].to_numpy(), np.sqrt(var), rtol=2e-3)
    assert np.all(fit.stderr["mean"] > fit.info["stderr_conditional"]["mean"])


def test_one_step_class_predictors_reach_the_covariate_models_optimum():
    from bayespmf.estimators import LatentClassPMF
    from bayespmf.fit import fit_latent_class_regression

    rng = np.random.default_rng(12)
    x, z, _ = simulate_logit(1500, rng, intercept=0.3)
    model = LatentClassPMF(2, n_init=5, random_state=0).fit(x)
    ours = class_predictors(model, x, z, correction="one-step")
    ref = fit_latent_class_regression(x, z, 2, n_init=5, random_state=0)
    beta = ref.params.beta
    if np.sign(beta[1, 1]) != np.sign(ours.estimates.loc["z0", 1]):  # label switch
        beta = beta[:, ::-1] - beta[:, [1]]
    assert ours.loglik == pytest.approx(ref.loglik, abs=1e-6)
    np.testing.assert_allclose(ours.estimates.to_numpy(), beta, atol=1e-4)
    np.testing.assert_allclose(ours.stderr.to_numpy()[:, 1], ref.stderr[:, 1], rtol=1e-3)


@pytest.mark.parametrize("correction", ["bch", "ml"])
def test_three_step_standard_errors_add_the_first_steps_uncertainty(rng, correction):
    """Bakk, Oberski & Vermunt (2014): V = V_cond + J Sigma1 J', J by refitting step 3
    through the public API from measurement models moved along each free coordinate
    (weights and indicator probabilities)."""
    from bayespmf.estimators import LatentClassPMF
    from bayespmf.fit.distal import _indicator_components, _information, _inverse
    from bayespmf.kernels.distal import StructuralState

    x, _, y = simulate(600, rng)
    model = LatentClassPMF(2, n_init=5, random_state=0).fit(x)
    weights, factors = model.weights_, model.factors_
    fit = distal_outcome(model, x, y, "gaussian", correction=correction)
    ind, _ = _indicator_components(x, factors)
    state1 = StructuralState(weights, None, tuple(c.theta for c in ind))
    info1, _, blocks1 = _information(
        state1, ind, np.zeros((x.shape[0], 2)), None, resp=None, fixed_weights=False
    )
    sigma1 = _inverse(info1)  # weights first, then the indicators
    cols, h = [], 1e-5
    for b, (flat, jmap, _) in enumerate(blocks1):
        for j in range(jmap.shape[1]):
            est = []
            for sign in (1, -1):
                w, pert = weights.copy(), [a.copy() for a in factors]
                moved = flat + sign * h * jmap[:, j]
                if b == 0:
                    w = moved
                else:
                    pert[b - 1] = moved.reshape(2, -1).T
                f = distal_outcome(
                    (w, pert),
                    x,
                    y,
                    "gaussian",
                    correction=correction,
                    stderr=False,
                    tol=1e-12,
                    max_iter=5000,
                )
                est.append(f.estimates.to_numpy().ravel())
            cols.append((est[0] - est[1]) / (2 * h))
    jac = np.array(cols).T  # (means and variances, free measurement coordinates)
    n_par = fit.estimates.shape[1]
    cond = fit.info["stderr_conditional"].to_numpy().ravel() ** 2
    var = cond + np.diag(jac @ sigma1 @ jac.T)
    np.testing.assert_allclose(fit.stderr.to_numpy().ravel(), np.sqrt(var), rtol=2e-3)
    assert np.all(fit.stderr["mean"] > fit.info["stderr_conditional"]["mean"])
    assert n_par == 2
