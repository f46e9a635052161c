"""The Bayesian one-step distal-outcome model (bayespmf.models.distal).

Its log-likelihood is checked against brute-force enumeration of the classes, row
by row, at a random parameter point; NUTS runs on a tiny data set.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from pymc.model.transform.conditioning import remove_value_transforms
from scipy.special import softmax
from scipy.stats import bernoulli, norm, poisson

from bayespmf.models import align_labels, latent_class_model, sample

X = np.array([[0, 1, 2], [1, 0, -1], [1, 1, 0], [0, -1, 1], [1, 1, 2], [0, 0, 0]])
Z = np.array([[0.5], [-1.0], [0.2], [1.0], [0.0], [-0.4]])
OUTCOMES = {
    "gaussian": np.array([0.1, 2.0, np.nan, -0.3, 1.5, 0.7]),
    "poisson": np.array([0.0, 3.0, 1.0, np.nan, 2.0, 5.0]),
    "bernoulli": np.array([0.0, 1.0, 1.0, 0.0, np.nan, 1.0]),
    "categorical": np.array(["a", "c", "b", None, "a", "c"], dtype=object),
}


def _point(family, rng, n_components=2):
    factors = [rng.dirichlet(np.ones(k), size=n_components) for k in (2, 2, 3)]  # (F, I_n)
    out = {"factors": factors, "weights": rng.dirichlet(np.ones(n_components))}
    out["coef"] = rng.normal(size=(2, n_components - 1))
    if family == "gaussian":
        out["outcome_mean"] = rng.normal(size=n_components)
        out["outcome_sigma"] = rng.uniform(0.5, 2.0, size=n_components)
    elif family == "poisson":
        out["outcome_mean"] = rng.uniform(0.5, 4.0, size=n_components)
    elif family == "bernoulli":
        out["outcome_mean"] = rng.uniform(0.1, 0.9, size=n_components)
    else:
        out["outcome_probs"] = rng.dirichlet(np.ones(3), size=n_components)
    return out


def _outcome_density(family, p, y, f):
    if family == "gaussian":
        return norm.pdf(y, p["outcome_mean"][f], p["outcome_sigma"][f])
    if family == "poisson":
        return poisson.pmf(y, p["outcome_mean"][f])
    if family == "bernoulli":
        return bernoulli.pmf(y, p["outcome_mean"][f])
    return p["outcome_probs"][f][["a", "b", "c"].index(y)]


def brute_force(family, p, covariates):
    """sum_s log sum_f pi_f(z_s) f(y_s | f) prod_{n observed} A_n(x_sn, f)."""
    total = 0.0
    for s, row in enumerate(X):
        if covariates:
            beta = np.c_[np.zeros(2), p["coef"]]
            prior = softmax(np.r_[1.0, Z[s]] @ beta)
        else:
            prior = p["weights"]
        lik = 0.0
        for f in range(prior.size):
            term = prior[f]
            for n, code in enumerate(row):
                if code >= 0:
                    term *= p["factors"][n][f, code]
            y = OUTCOMES[family][s]
            if y is not None and not (isinstance(y, float) and np.isnan(y)):
                term *= _outcome_density(family, p, y, f)
            lik += term
        total += np.log(lik)
    return total


def _model_loglik(model, p):
    """The observed variables' log-density at ``p`` (constrained values, no Jacobian)."""
    plain = remove_value_transforms(model)
    values = {}
    for rv in plain.free_RVs:
        name = rv.name
        if name.startswith("A_"):
            values[name] = p["factors"][["A_x0", "A_x1", "A_x2"].index(name)]
        else:
            values[name] = p[name]
    fn = plain.compile_logp(vars=[plain["x"], plain["y"]], jacobian=False)
    return float(fn(values))


@pytest.mark.parametrize(
    ("family", "covariates"),
    [(f, False) for f in sorted(OUTCOMES)] + [("gaussian", True), ("categorical", True)],
)
def test_logp_equals_brute_force_enumeration(family, covariates):
    rng = np.random.default_rng(hash((family, covariates)) % 2**32)
    model = latent_class_model(
        X,
        2,
        outcome=OUTCOMES[family],
        outcome_family=family,
        covariates=Z if covariates else None,
    )
    p = _point(family, rng)
    assert _model_loglik(model, p) == pytest.approx(
        brute_force(family, p, covariates), rel=1e-10
    )


def test_named_dims():
    model = latent_class_model(
        X, 2, outcome=OUTCOMES["categorical"], outcome_family="categorical", covariates=Z
    )
    dims = model.named_vars_to_dims
    assert dims["outcome_probs"] == ("class", "outcome_category")
    assert dims["y"] == ("outcome_row",)
    assert list(model.coords["outcome_category"]) == ["a", "b", "c"]
    assert list(model.coords["outcome_row"]) == [0, 1, 2, 4, 5]


@pytest.mark.slow  # compiling and sampling: 24-86 s on the shared 2-core machine
def test_nuts_recovers_class_means():
    rng = np.random.default_rng(0)
    n = 300
    h = rng.integers(0, 2, n)
    x = (rng.random((n, 5)) < np.array([0.15, 0.85])[h][:, None]).astype(int)
    y = rng.normal(np.array([-1.0, 1.0])[h], 0.5)
    model = latent_class_model(x, 2, outcome=y)
    with model:
        idata = pm.sample(
            draws=150,
            tune=150,
            chains=1,
            random_seed=1,
            progressbar=False,
            compute_convergence_checks=False,
        )
    means = np.sort(idata.posterior["outcome_mean"].mean(("chain", "draw")).values)
    np.testing.assert_allclose(means, [-1.0, 1.0], atol=0.2)


def test_refusals():
    with pytest.raises(ValueError, match="must hold one value per row"):
        latent_class_model(X, 2, outcome=[1.0, 2.0])
    with pytest.raises(ValueError, match="'family' parameter"):
        latent_class_model(X, 2, outcome=OUTCOMES["gaussian"], outcome_family="normal")


def _class_order_agrees(post):
    """Share of draws where the class with the larger Pr(x0 = 1) has the larger mean."""
    a1 = post["A_x0"].transpose("chain", "draw", "class", ...).values[..., 1]
    return np.mean(np.argmax(a1, -1) == np.argmax(post["outcome_mean"].values, -1))


@pytest.mark.slow  # compiling and sampling two chains: about 15-40 s
def test_sample_front_door_aligns_the_outcome_with_the_classes():
    rng = np.random.default_rng(0)
    n = 300
    h = rng.integers(0, 2, n)
    x = (rng.random((n, 5)) < np.array([0.15, 0.85])[h][:, None]).astype(int)
    y = rng.normal(np.array([-1.0, 1.0])[h], 0.5)
    idata = sample(
        latent_class_model(x, 2, outcome=y),
        draws=150,
        tune=150,
        chains=2,
        random_seed=1,
        progressbar=False,
    )
    post = idata.posterior
    # class 1 of the truth has Pr(x = 1) = 0.85 and mean +1
    assert _class_order_agrees(post) > 0.99
    means = post["outcome_mean"].mean(("chain", "draw")).values
    np.testing.assert_allclose(np.sort(means), [-1.0, 1.0], atol=0.2)
    assert {"x", "y"} <= set(idata.log_likelihood.data_vars)
    # the classes of chain 1 relabeled by hand, every class-dimensioned variable with
    # them: alignment puts the outcome's parameters back with the factors
    flipped = post.copy()
    for name in post.data_vars:
        if "class" in post[name].dims:
            v = post[name].values.copy()
            axis = post[name].dims.index("class")
            v[1] = np.flip(v[1], axis=axis - 1)
            flipped[name] = post[name].copy(data=v)
    reference = (
        post["weights"].values[0].mean(0),
        [post[f"A_x{n}"].values[0].mean(0).T for n in range(5)],  # (category, class)
    )
    idata["posterior"] = flipped  # (attribute assignment would not replace the group)
    assert idata["posterior"]["weights"].values[1, 0, 0] == post["weights"].values[1, 0, 1]
    realigned = align_labels(idata, reference)
    assert _class_order_agrees(realigned.posterior) > 0.99
    np.testing.assert_allclose(
        realigned.posterior["outcome_mean"].values[1].mean(0),
        realigned.posterior["outcome_mean"].values[0].mean(0),
        atol=0.2,
    )
