import itertools
import warnings

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
import xarray as xr
from pymc.model.transform.conditioning import remove_value_transforms

from bayespmf import CategoricalData, DataValidationError
from bayespmf.datasets import make_latent_class
from bayespmf.estimators import LatentClassPMF
from bayespmf.models import (
    LatentClassRows,
    align_labels,
    convergence_summary,
    impute,
    initvals,
    latent_class_model,
    model_data,
    pivot_model,
    posterior_class_proba,
    posterior_predict_proba,
    sample,
)
from bayespmf.models.latent_class import PivotLogRatio, factor_var_name


@pytest.fixture(scope="module")
def small():
    data, truth = make_latent_class(
        120,
        [3, 2, 4],
        n_components=2,
        observed_prob=0.7,
        drop_empty_rows=True,
        random_state=4,
    )
    return data, truth


def brute_force_row_logliks(codes, weights, factors):
    """Per-row log-likelihood by enumerating the classes, loop by loop."""
    out = []
    for row in codes:
        p = 0.0
        for f in range(len(weights)):
            term = weights[f]
            for n, x in enumerate(row):
                if x >= 0:
                    term *= factors[n][x, f]
            p += term
        out.append(np.log(p))
    return np.array(out)


def brute_force_loglik(codes, weights, factors):
    return brute_force_row_logliks(codes, weights, factors).sum()


def brute_force_membership(codes, weights, factors):
    """Pr(class | observed entries) by Bayes' rule, loop by loop."""
    out = np.zeros((len(codes), len(weights)))
    for s, row in enumerate(codes):
        for f in range(len(weights)):
            out[s, f] = weights[f] * np.prod(
                [factors[n][x, f] for n, x in enumerate(row) if x >= 0]
            )
        out[s] /= out[s].sum()
    return out


def row_logp_fn(model):
    """Per-row logp of the observed rows as a function of the constrained parameters."""
    x = model["x"]
    return model.compile_fn(
        pm.logp(x, model["rows"]), inputs=model.free_RVs, on_unused_input="ignore"
    )


def point_of(data, weights, factors):
    return {"weights": weights} | {
        factor_var_name(n): a.T for n, a in zip(data.names, factors, strict=True)
    }


def test_logp_equals_enumeration(small, rng):
    data, _ = small
    model = latent_class_model(data, n_components=2)
    w = rng.dirichlet(np.ones(2))
    factors = [rng.dirichlet(np.ones(k), size=2).T for k in data.n_categories]
    got = row_logp_fn(model)(point_of(data, w, factors))
    want = brute_force_row_logliks(data.codes, w, factors)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # the model's log-likelihood term is their sum (at constrained values)
    untransformed = remove_value_transforms(model)
    total = untransformed.compile_logp(vars=[untransformed["x"]])(
        point_of(data, w, factors)
    )
    assert total == pytest.approx(brute_force_loglik(data.codes, w, factors), rel=1e-12)


def test_rows_distribution_logp_and_draws():
    w = np.array([0.3, 0.7])
    a = [np.array([[0.9, 0.1], [0.2, 0.8]]), np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])]
    x = LatentClassRows.dist(w, a, shape=(4000, 2))
    codes = np.array([[0, 2], [-1, 1], [1, -1], [-1, -1], [2, 0], [0, -2]])
    lp = pm.logp(x, codes).eval()
    factors = [m.T for m in a]
    want = brute_force_row_logliks(codes[:4], w, factors)
    np.testing.assert_allclose(lp[:4], want, rtol=1e-12, atol=1e-14)
    assert lp[4] == -np.inf and lp[5] == -np.inf  # a code outside [-1, I_n)
    draws = pm.draw(x, random_seed=1)
    assert draws.shape == (4000, 2)
    assert draws.min() >= 0 and (draws.max(0) < [2, 3]).all()
    # the generative graph draws from the joint PMF sum_f w_f a0[f, i] a1[f, j]
    joint = np.einsum("f,fi,fj->ij", w, a[0], a[1])
    freq = np.zeros((2, 3))
    np.add.at(freq, (draws[:, 0], draws[:, 1]), 1.0 / len(draws))
    np.testing.assert_array_less(
        np.abs(freq - joint), 4 * np.sqrt(joint / len(draws)) + 1e-3
    )
    with pytest.raises(DataValidationError, match="static number of categories"):
        LatentClassRows.dist(w, [pt.matrix("a")], shape=(1, 1))


def test_model_dims_and_coords():
    data = CategoricalData.from_codes(
        [[0, 1], [1, -1], [-1, -1]],
        [2, 3],
        names=["colour", "size"],
        categories=[["red", "blue"], ["S", "M", "L"]],
    )
    model = latent_class_model(data, n_components=3)
    assert model.named_vars_to_dims["A_size"] == ("class", "size_category")
    assert list(model.coords["size_category"]) == ["S", "M", "L"]
    assert len(model.coords["class"]) == 3
    assert len(model.coords["row"]) == 2  # the all-missing row is dropped
    # the rows are data and the likelihood an observed variable, on named dims
    assert list(model.coords["variable"]) == ["colour", "size"]
    assert model.named_vars_to_dims["rows"] == ("row", "variable")
    assert model.named_vars_to_dims["x"] == ("row", "variable")
    assert model["x"] in model.observed_RVs and model["rows"] in model.data_vars
    # nothing hangs on the model object: sample() reads it all back from the model
    assert not [k for k in vars(model) if k.startswith("_bayespmf")]
    got, n_components = model_data(model)
    assert n_components == 3 and got == data.drop_empty_rows()
    assert got.categories == [["red", "blue"], ["S", "M", "L"]]
    with pytest.raises(DataValidationError, match="latent_class_model"):
        model_data(pm.Model())


def test_prior_predictive(small):
    data, _ = small
    model = latent_class_model(data, n_components=2)
    prior = pm.sample_prior_predictive(draws=20, model=model, random_seed=0)
    x = prior.prior_predictive["x"]
    assert x.dims == ("chain", "draw", "row", "variable")
    assert x.shape == (1, 20, data.n_samples, 3)
    assert (x.values >= 0).all() and (x.values.max((0, 1, 2)) < data.n_categories).all()


def test_model_errors(small):
    data, _ = small
    with pytest.raises(ValueError, match="'n_components'"):
        latent_class_model(data, 0)
    codes = np.array(data.codes)
    codes[:, 1] = -1
    with pytest.raises(DataValidationError, match="never observed"):
        latent_class_model(CategoricalData.from_codes(codes, data.n_categories), 2)
    with pytest.raises(ValueError, match="factor_prior"):
        latent_class_model(data, 2, factor_prior=0.0)
    model = latent_class_model(data, 2)
    with pytest.raises(DataValidationError, match="rank 2"):
        initvals(model, (np.ones(3) / 3, [np.ones((k, 3)) / k for k in [3, 2, 4]]))
    with pytest.raises(DataValidationError, match=r"factors\[1\]' must have shape"):
        initvals(model, (np.ones(2) / 2, [np.ones((k, 2)) / k for k in [3, 3, 4]]))
    with pytest.raises(DataValidationError, match="'init' must be"):
        initvals(model, "nonsense")
    with pytest.raises(DataValidationError, match="'method'"):
        sample(model, method="hmc")
    with pytest.raises(DataValidationError, match="'n_components' is required"):
        sample(data)
    with pytest.raises(DataValidationError, match="'simplex_transform'"):
        sample(model, simplex_transform="stick")
    with pytest.raises(DataValidationError, match="pivots in"):
        PivotLogRatio([0, 3], 3)


def test_pivot_logratio_inverse_and_jacobian(rng):
    pivot = np.array([2, 0, 1])
    t = PivotLogRatio(pivot, 3)
    x = rng.dirichlet(np.ones(3), size=3)
    y = t.forward(x).eval()
    for r, p in enumerate(pivot):  # log-ratios to the pivot entry, in order
        others = [k for k in range(3) if k != p]
        np.testing.assert_allclose(y[r], np.log(x[r, others] / x[r, p]))
    np.testing.assert_allclose(t.backward(y).eval(), x)
    # log|det d x_free / d y| by finite differences, x_free = x without the pivot
    lj = t.log_jac_det(y).eval()
    eps = 1e-6
    for r, p in enumerate(pivot):
        others = [k for k in range(3) if k != p]
        jac = np.empty((2, 2))
        for j in range(2):
            dy = np.zeros_like(y)
            dy[r, j] = eps
            hi, lo = t.backward(y + dy).eval(), t.backward(y - dy).eval()
            jac[:, j] = (hi[r, others] - lo[r, others]) / (2 * eps)
        np.testing.assert_allclose(lj[r], np.log(abs(np.linalg.det(jac))), rtol=1e-6)


def test_pivot_model_has_the_same_posterior(small, rng):
    """Same logp on the simplex (up to a constant): the log-ratio Jacobian is exact."""
    from pymc.initial_point import make_initial_point_fn

    data, truth = small
    model = latent_class_model(data, 2)
    pivoted = pivot_model(model, (truth.weights, truth.factors))
    assert {str(v) for v in pivoted.free_RVs} == {str(v) for v in model.free_RVs}
    assert pivoted.rvs_to_transforms[pivoted["A_x0"]].pivot.tolist() == list(
        np.argmax(truth.factors[0], axis=0)
    )

    def random_point():
        return (
            rng.dirichlet(np.ones(2)),
            [rng.dirichlet(np.ones(k), size=2).T for k in data.n_categories],
        )

    points = [initvals(model, random_point(), jitter=0.0)[0] for _ in "ab"]
    logps = []
    for m in (model, pivoted):
        logp = m.compile_logp()
        logps.append(
            [
                logp(
                    make_initial_point_fn(model=m, overrides=p, return_transformed=True)(0)
                )
                for p in points
            ]
        )
    (a0, a1), (b0, b1) = logps
    # the two transforms' Jacobians differ by log K per simplex row, a constant
    assert not np.isclose(a0, a1)
    np.testing.assert_allclose(a0 - a1, b0 - b1, rtol=1e-10)
    const = np.log(2) + sum(2 * np.log(k) for k in data.n_categories)
    np.testing.assert_allclose(a0 - b0, const, rtol=1e-10)


def _value_order(model, fused):
    """Permutation taking the fused vector's entries to ``model``'s raveled value vars."""
    layout = fused.bayespmf_pivot_layout
    names = [str(v) for v in fused.coords["variable"]]
    segments, pos = {}, 0
    for key, rows in [("weights", 1)] + [
        (factor_var_name(n), layout.n_components) for n in names
    ]:
        size = int(layout.size[layout.start >= pos][:rows].sum() - rows)
        segments[key] = np.arange(pos, pos + size)
        pos += size
    keys = [model.values_to_rvs[v].name for v in model.value_vars]
    return np.concatenate([segments[k] for k in keys])


@pytest.mark.slow
def test_fused_pivot_model_has_the_density_of_the_transforms(small, rng):
    """logp and gradient equal the transform model's, and a brute-force density."""
    from pymc.model.transform.optimization import freeze_dims_and_data
    from scipy.stats import dirichlet

    from bayespmf.models._pivot import LOGRATIOS_NAME, fused_pivot_model
    from bayespmf.models._pivot import pivot_transforms as _pivot_transforms
    from bayespmf.models._pivot import pivots as _pivots

    data, truth = small
    model = freeze_dims_and_data(
        latent_class_model(data, 2, weights_prior=2.0, factor_prior=0.7)
    )
    pivots = _pivots(model, (truth.weights, truth.factors))
    fused = fused_pivot_model(model, data.codes, *pivots)
    transformed = _pivot_transforms(model, *pivots)
    assert [v.name for v in fused.free_RVs] == [LOGRATIOS_NAME]
    assert {v.name for v in fused.deterministics} == {v.name for v in model.free_RVs}
    for name in ("weights", "A_x1"):
        assert tuple(fused.named_vars_to_dims[name]) == tuple(
            model.named_vars_to_dims[name]
        )
    order = _value_order(transformed, fused)
    f_fused = fused.logp_dlogp_function(ravel_inputs=True)
    f_trans = transformed.logp_dlogp_function(ravel_inputs=True)
    f_fused.set_extra_values({})
    f_trans.set_extra_values({})
    values = fused.compile_fn(
        fused.replace_rvs_by_values(
            [fused["weights"], *[fused[factor_var_name(n)] for n in data.names]]
        ),
        inputs=fused.value_vars,
        point_fn=False,
    )
    for scale in (0.5, 3.0, 30.0):
        theta = scale * rng.standard_normal(fused.value_vars[0].type.shape[0])
        lp, grad = f_fused(theta)
        lp_t, grad_t = f_trans(theta[order])
        np.testing.assert_allclose(lp, lp_t, rtol=1e-12)
        np.testing.assert_allclose(grad[order], grad_t, rtol=1e-9, atol=1e-9)
        # independently: Dirichlet densities, the log-Jacobian sum(log x) of every
        # row, and the class-enumerated likelihood
        w, *factors = values(theta)
        if scale < 30:  # a scipy Dirichlet refuses entries that underflow to 0
            brute = dirichlet.logpdf(w, np.full(2, 2.0)) + np.log(w).sum()
            for a in factors:
                for row in a:
                    brute += (
                        dirichlet.logpdf(row, np.full(row.size, 0.7)) + np.log(row).sum()
                    )
            brute += brute_force_loglik(data.codes, w, [a.T for a in factors])
            np.testing.assert_allclose(lp, brute, rtol=1e-10)


def test_fused_pivot_model_only_for_plain_latent_class_models(small):
    """Any other variable or a prior that is not a constant: None (transforms used)."""
    from pymc.model.transform.optimization import freeze_dims_and_data

    from bayespmf.models._pivot import fused_pivot_model
    from bayespmf.models._pivot import pivots as _pivots

    data, truth = small
    model = latent_class_model(data, 2)
    pivots = _pivots(model, (truth.weights, truth.factors))
    assert fused_pivot_model(freeze_dims_and_data(model), data.codes, *pivots) is not None
    with model:
        pm.Potential("extra", -pt.sum(model["weights"] ** 2))
    assert fused_pivot_model(freeze_dims_and_data(model), data.codes, *pivots) is None


def test_sample_draws_have_no_logratios_and_start_exactly(small):
    """The fused vector is dropped; the draws keep the model's names and dims."""
    data, truth = small
    idata = sample(
        latent_class_model(data, 2),
        init=(truth.weights, truth.factors),
        draws=20,
        tune=20,
        chains=1,
        random_seed=2,
        progressbar=False,
        align=False,
        log_likelihood=False,
    )
    post = idata.posterior
    assert set(post.data_vars) == {"weights", "A_x0", "A_x1", "A_x2"}
    assert post["A_x2"].dims == ("chain", "draw", "class", "x2_category")
    assert not [d for d in post.dims if "logratio" in d]
    np.testing.assert_allclose(post["A_x2"].sum("x2_category"), 1.0, rtol=1e-12)


def fake_idata(truth, perms, noise=0.0, rng=None, data=None):
    """Posterior draws equal to the truth with the classes permuted per draw.

    With ``data``, the dims and coordinates are those of ``latent_class_model(data)``
    (so PyMC's predictive sampling takes the draws as they are).
    """
    w = truth.weights[perms]
    if noise:
        w = w + noise * rng.random(w.shape)
        w /= w.sum(-1, keepdims=True)
    post = {"weights": w}
    names = [f"x{n}" for n in range(len(truth.factors))]
    for name, a in zip(names, truth.factors, strict=True):
        at = a.T[perms]  # (chain, draw, F, I)
        if noise:
            at = at + noise * rng.random(at.shape)
            at /= at.sum(-1, keepdims=True)
        post[factor_var_name(name)] = at
    dims = {"weights": ["class"]} | {
        factor_var_name(n): ["class", f"{n}_category"] for n in names
    }
    coords = None
    if data is not None:
        coords = {"class": np.arange(len(truth.weights))} | {
            f"{n}_category": cats for n, cats in zip(names, data.categories, strict=True)
        }
    return az.from_dict({"posterior": post}, dims=dims, coords=coords), names


def test_align_undoes_planted_permutation(rng):
    _, truth = make_latent_class(10, [3, 4, 5], n_components=4, random_state=2)
    perms = np.array([rng.permutation(4) for _ in range(2 * 30)]).reshape(2, 30, 4)
    idata, names = fake_idata(truth, perms)
    data = CategoricalData.from_codes(np.zeros((1, 3), dtype=int), [3, 4, 5], names=names)
    aligned = align_labels(idata, (truth.weights, truth.factors), data)
    np.testing.assert_array_equal(
        aligned.posterior["weights"].values, np.broadcast_to(truth.weights, (2, 30, 4))
    )
    for name, a in zip(names, truth.factors, strict=True):
        np.testing.assert_array_equal(
            aligned.posterior[factor_var_name(name)].values,
            np.broadcast_to(a.T, (2, 30, 4, a.shape[0])),
        )
    # recorded permutation: aligned[f] = raw[perm[f]]
    rec = aligned.sample_stats["class_permutation"].values
    raw = idata.posterior["weights"].values
    np.testing.assert_array_equal(
        np.take_along_axis(raw, rec, axis=-1), aligned.posterior["weights"].values
    )
    assert "unaligned_posterior" in aligned.children
    np.testing.assert_array_equal(aligned.unaligned_posterior["weights"].values, raw)
    # raw r-hat is bad, aligned r-hat is fine on noisy draws
    # each chain sits in its own labelling, as samplers do (STACK-NOTES.md)
    perms = np.stack([np.tile(np.arange(4), (400, 1)), np.tile([2, 3, 0, 1], (400, 1))])
    noisy, _ = fake_idata(truth, perms, noise=0.01, rng=rng)
    raw_rhat = convergence_summary(noisy)["table"]["r_hat_max"].min()
    al = align_labels(noisy, (truth.weights, truth.factors), data)
    assert raw_rhat > 1.5
    assert convergence_summary(al)["table"]["r_hat_max"].max() < 1.02


def test_posterior_predict_proba(rng):
    data, truth = make_latent_class(
        50, [3, 4, 5], n_components=2, observed_prob=0.8, random_state=3
    )
    perms = np.array([rng.permutation(2) for _ in range(20)]).reshape(2, 10, 2)
    idata, _ = fake_idata(truth, perms)
    p = posterior_predict_proba(idata, data, target=1, model_data=data)
    np.testing.assert_allclose(p.sum(1), 1.0)
    # every draw is the truth (relabeled): the average equals the point prediction
    point = LatentClassPMF.from_params(truth.weights, truth.factors).predict_proba(data, 1)
    np.testing.assert_allclose(p, point, rtol=1e-10)
    with pytest.raises(DataValidationError, match="Unknown target"):
        posterior_predict_proba(idata, data, target="nope", model_data=data)


def test_posterior_predictive_marginals_match_data(rng):
    # draws at the truth: new rows from pm.sample_posterior_predictive have the
    # data's one-way marginals up to the data's own sampling error
    data, truth = make_latent_class(
        1500,
        [3, 2, 4],
        n_components=2,
        observed_prob=0.8,
        drop_empty_rows=True,
        random_state=7,
    )
    model = latent_class_model(data, n_components=2)
    perms = np.array([rng.permutation(2) for _ in range(2 * 25)]).reshape(2, 25, 2)
    idata, _ = fake_idata(truth, perms, data=data)
    with model:
        pp = pm.sample_posterior_predictive(idata, random_seed=3, progressbar=False)
    x = pp.posterior_predictive["x"]
    assert x.dims == ("chain", "draw", "row", "variable")
    assert x.shape == (2, 25, data.n_samples, 3)
    for n, k in enumerate(data.n_categories):
        obs = data.codes[:, n][data.codes[:, n] >= 0]
        p_data = np.bincount(obs, minlength=k) / obs.size
        p_pp = np.bincount(x.values[..., n].ravel(), minlength=k) / x[..., n].size
        se = np.sqrt(p_data * (1 - p_data) / obs.size)
        np.testing.assert_array_less(np.abs(p_pp - p_data), 4 * se + 0.005)


def test_impute_follows_the_fitted_conditional(rng):
    data, truth = make_latent_class(
        40,
        [3, 2, 4],
        n_components=2,
        observed_prob=0.6,
        drop_empty_rows=True,
        random_state=5,
    )
    n_draws = 3000
    perms = np.array([rng.permutation(2) for _ in range(n_draws)]).reshape(1, -1, 2)
    idata, _ = fake_idata(truth, perms, data=data)  # labels permuted draw by draw
    filled = impute(idata, data, random_seed=0)
    assert filled.dims == ("chain", "draw", "row", "variable")
    assert filled.shape == (1, n_draws, data.n_samples, 3)
    codes = filled.values[0]
    mask = data.mask
    # observed cells are kept, missing ones filled with codes in range
    np.testing.assert_array_equal(
        codes[:, mask], np.broadcast_to(data.codes[mask], (n_draws, mask.sum()))
    )
    assert (codes >= 0).all() and (codes.max((0, 1)) < data.n_categories).all()
    point = LatentClassPMF.from_params(truth.weights, truth.factors)
    for n, k in enumerate(data.n_categories):
        rows = np.flatnonzero(~mask[:, n])
        want = point.predict_proba(data, n)[rows]  # Pr(x_n | observed entries)
        freq = (codes[:, rows, n, None] == np.arange(k)).mean(0)
        se = np.sqrt(want * (1 - want) / n_draws)
        np.testing.assert_array_less(np.abs(freq - want), 5 * se + 2e-3)
    # without 'data': the rows recorded by sample() in observed_data
    rows = xr.DataArray(
        np.asarray(data.codes),
        dims=("row", "variable"),
        coords={"variable": list(data.names)},
    )
    idata["observed_data"] = xr.Dataset({"x": rows})
    again = impute(idata, random_seed=0)
    np.testing.assert_array_equal(again.values, filled.values)


def test_compute_log_likelihood_equals_row_logliks_and_loo_runs(small, rng):
    data, truth = small
    model = latent_class_model(data, n_components=2)
    draws = 30
    w = rng.dirichlet(10 * truth.weights, size=(2, draws))
    post = {"weights": w}
    factors = []
    for n, a in zip(data.names, truth.factors, strict=True):
        # (chain, draw, class, category), near the truth
        draw = np.stack([rng.dirichlet(50 * col + 0.1, size=(2, draws)) for col in a.T], 2)
        post[factor_var_name(n)] = draw
        factors.append(draw)
    idata = az.from_dict(
        {"posterior": post},
        dims={"weights": ["class"]}
        | {factor_var_name(n): ["class", f"{n}_category"] for n in data.names},
    )
    pm.compute_log_likelihood(idata, model=model, progressbar=False)
    ll = idata.log_likelihood["x"]
    assert ll.dims == ("chain", "draw", "row")
    for c, d in [(0, 0), (1, draws - 1), (0, 7)]:
        want = brute_force_row_logliks(data.codes, w[c, d], [f[c, d].T for f in factors])
        np.testing.assert_allclose(ll.values[c, d], want, rtol=1e-12)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Estimated shape parameter of Pareto")
        loo = az.loo(idata)
    assert np.isfinite(loo.elpd)
    assert loo.elpd == pytest.approx(ll.values.mean((0, 1)).sum(), abs=5.0)


def test_membership_is_bayes_rule_when_every_draw_is_the_truth(small, rng):
    data, truth = small
    perms = np.zeros((2, 15, 2), dtype=int) + np.arange(2)  # aligned draws
    idata, _ = fake_idata(truth, perms, data=data)
    member = posterior_class_proba(idata, data, hdi_prob=0.9)
    assert member["mean"].dims == ("row", "class")
    assert member.attrs["hdi_prob"] == 0.9
    want = brute_force_membership(data.codes, truth.weights, truth.factors)
    np.testing.assert_allclose(member["mean"].values, want, rtol=1e-10)
    est = LatentClassPMF.from_params(truth.weights, truth.factors)
    np.testing.assert_allclose(member["mean"].values, est.predict_class_proba(data))
    np.testing.assert_allclose(member["sd"].values, 0.0, atol=1e-12)
    np.testing.assert_allclose(member["hdi_lower"].values, want, rtol=1e-10)
    np.testing.assert_allclose(member["hdi_upper"].values, want, rtol=1e-10)
    frame = member.to_dataframe()
    assert len(frame) == 2 * data.n_samples
    draws = posterior_class_proba(idata, data, return_draws=True)
    assert draws.dims == ("chain", "draw", "row", "class")
    np.testing.assert_allclose(draws.values[1, 3], want, rtol=1e-10)


def test_membership_intervals_cover_the_draws(small, rng):
    data, truth = small
    perms = np.zeros((2, 200, 2), dtype=int) + np.arange(2)
    idata, _ = fake_idata(truth, perms, noise=0.05, rng=rng, data=data)
    member = posterior_class_proba(idata, data)
    draws = posterior_class_proba(idata, data, return_draws=True)
    np.testing.assert_allclose(member["mean"], draws.mean(("chain", "draw")))
    inside = (draws >= member["hdi_lower"]) & (draws <= member["hdi_upper"])
    assert float(inside.mean()) == pytest.approx(0.94, abs=0.02)
    np.testing.assert_allclose(member["mean"].sum("class"), 1.0)


@pytest.mark.slow
def test_nuts_from_point_estimate(small):
    data, truth = small
    model = latent_class_model(data, n_components=2)
    # a permuted truth as start: the sampler must start there, not at PyMC's default
    perm = np.array([1, 0])
    start = (truth.weights[perm], [a[:, perm] for a in truth.factors])
    idata = sample(
        model,
        init=start,
        draws=30,
        tune=0,
        chains=2,
        random_seed=1,
        progressbar=False,
        align=False,
    )
    first = idata.posterior[factor_var_name("x2")].values[:, 0]  # (chain, F, I)
    for c in range(2):
        d_start = np.abs(first[c] - start[1][2].T).max()
        d_other = np.abs(first[c] - truth.factors[2].T).max()
        assert d_start < d_other
    idata = sample(
        model, init=start, draws=100, tune=100, chains=2, random_seed=2, progressbar=False
    )
    assert "log_likelihood" in idata.children
    assert idata.log_likelihood["x"].shape == (2, 100, data.n_samples)
    with warnings.catch_warnings():
        # 100 draws are too few for reliable Pareto-k; the diagnostic is not the point
        warnings.filterwarnings("ignore", "Estimated shape parameter of Pareto")
        loo = az.loo(idata)
    assert np.isfinite(loo.elpd)
    # after alignment to the start, the posterior mean sits near the (permuted) truth
    mean_w = idata.posterior["weights"].mean(("chain", "draw")).values
    np.testing.assert_allclose(mean_w, start[0], atol=0.2)
    # the rows travel with the draws; the PyMC tools work on the output
    np.testing.assert_array_equal(idata.observed_data["x"].values, data.codes)
    np.testing.assert_array_equal(idata.constant_data["rows"].values, data.codes)
    with model:
        pp = pm.sample_posterior_predictive(idata, random_seed=0, progressbar=False)
    x = pp.posterior_predictive["x"].values
    assert x.shape == (2, 100, data.n_samples, 3)
    for n, k in enumerate(data.n_categories):
        obs = data.codes[:, n][data.codes[:, n] >= 0]
        p_data = np.bincount(obs, minlength=k) / obs.size
        p_pp = np.bincount(x[..., n].ravel(), minlength=k) / x[..., n].size
        # posterior predictive: the data's sampling error plus the posterior spread
        np.testing.assert_array_less(np.abs(p_pp - p_data), 0.08)
    member = posterior_class_proba(idata)
    assert member["mean"].shape == (data.n_samples, 2)
    filled = impute(idata, random_seed=0)
    assert (filled.values >= 0).all()


@pytest.mark.slow
def test_advi_runs(small):
    data, truth = small
    idata = sample(
        data,
        n_components=2,
        method="advi",
        init=(truth.weights, truth.factors),
        draws=50,
        advi_iterations=500,
        random_seed=0,
        progressbar=False,
    )
    assert idata.posterior["weights"].shape == (1, 50, 2)
    assert idata.posterior.attrs["sampling_method"] == "advi"


def test_brute_force_helper_consistency():
    # the reference itself agrees with itertools enumeration of the full joint
    w = np.array([0.3, 0.7])
    fs = [np.array([[0.2, 0.6], [0.8, 0.4]]), np.array([[0.5, 0.1], [0.5, 0.9]])]
    total = sum(
        np.exp(brute_force_loglik(np.array([[a, b]]), w, fs))
        for a, b in itertools.product(range(2), range(2))
    )
    assert total == pytest.approx(1.0)


def test_convergence_summary_names_chains_in_different_modes():
    import xarray as xr

    rng = np.random.default_rng(0)
    # chains 0 and 2 around -100, chains 1 and 3 around -110 (sd 1 within chains)
    centre = np.array([-100.0, -110.0, -100.0, -110.0])[:, None, None]
    ll = centre / 5 + rng.normal(0, 1 / np.sqrt(5), size=(4, 200, 5))
    post = xr.Dataset({"weights": (("chain", "draw", "class"), rng.random((4, 200, 2)))})
    loglik = xr.Dataset({"x": (("chain", "draw", "row"), ll)})
    idata = xr.DataTree.from_dict({"posterior": post, "log_likelihood": loglik})
    idata.posterior.attrs["chain_start_optimum"] = [0, 1, 0, 1]
    words = " ".join(convergence_summary(idata)["problems"])
    assert "2 different modes" in words
    assert "chains [0, 2] around -100" in words and "chains [1, 3] around -1" in words
    assert "started at optima [0, 1, 0, 1]" in words
    # one mode: nothing said about modes
    idata.log_likelihood["x"].values[:] = rng.normal(-20, 0.45, size=(4, 200, 5))
    assert not any("modes" in p for p in convergence_summary(idata)["problems"])


def test_convergence_summary_tells_slow_mixing_from_modes():
    import xarray as xr

    rng = np.random.default_rng(1)
    # one parameter's chains disagree (r-hat far above 1.01) ...
    weights = rng.normal(0, 0.01, size=(2, 300, 2)) + np.array([0.3, 0.5])[:, None, None]
    post = xr.Dataset({"weights": (("chain", "draw", "class"), weights)})
    # ... while both chains' total log-likelihoods sit at the same level
    ll = rng.normal(-4.0, 0.5, size=(2, 300, 5))
    loglik = xr.Dataset({"x": (("chain", "draw", "row"), ll)})
    idata = xr.DataTree.from_dict({"posterior": post, "log_likelihood": loglik})
    words = " ".join(convergence_summary(idata)["problems"])
    assert "explore the same region of the posterior slowly" in words
    assert "modes" not in words
    # the same draws with the chains' levels 10 pooled sds apart: modes, not slow mixing
    idata.log_likelihood["x"].values[1] -= 20 * np.sqrt(5) * 0.5 / 5
    words = " ".join(convergence_summary(idata)["problems"])
    assert "2 different modes" in words
    assert "slowly" not in words
    # without pointwise log-likelihoods, the generic words
    bare = xr.DataTree.from_dict({"posterior": post})
    words = " ".join(convergence_summary(bare)["problems"])
    assert "label switching not undone, several modes, or too few draws" in words


@pytest.mark.slow
def test_chains_start_at_distinct_optima():
    from bayespmf.fit import LocalOptimumWarning

    data, _ = make_latent_class(300, [2] * 6, n_components=3, random_state=2)
    # two starts that end 0.43 log-lik units apart (see tests/test_fit_latent_class.py)
    good = LatentClassPMF(3, random_state=0, n_init=8).fit(data).params_
    bad = LatentClassPMF(3, "em", random_state=5, tol=1e-10, max_iter=20000).fit(data)
    with pytest.warns(LocalOptimumWarning):
        point = LatentClassPMF(3, init=[good, bad.params_]).fit(data)
    assert len(point.optima_) == 2
    model = latent_class_model(data, n_components=3)
    idata = sample(
        model,
        init=("optima", point),
        draws=5,
        tune=0,
        chains=2,
        random_seed=0,
        progressbar=False,
        align=False,
    )
    assert idata.posterior.attrs["chain_start_optimum"] == [0, 1]
    ll = idata.log_likelihood["x"].sum("row").values[:, 0]
    want = point.optima_["loglik"].to_numpy()[:2]
    # each chain's first draw is near the optimum it started at
    assert abs(ll[0] - want[0]) < abs(ll[0] - want[1]) + 1.0
    with pytest.raises(DataValidationError, match="'init' parameter of sample"):
        sample(model, init="best", draws=5, tune=0, chains=1, progressbar=False)


# ------------------------------------------------------------ estimates bound by name


@pytest.fixture(scope="module")
def votes_fit():
    import pandas as pd

    from bayespmf.datasets import load_votes

    df = load_votes()[0].to_pandas()
    est = LatentClassPMF(2, "cnmf-spa-em", random_state=0).fit(df)
    return pd.DataFrame(df), est


def _start_factors(iv, names):
    return {n: np.asarray(iv[factor_var_name(n)]).T for n in names}  # (I_n, F)


def test_start_is_bound_to_the_model_by_variable_name(votes_fit):
    # issue 23: the estimate's factor for a variable must start that variable's factor,
    # whatever the column order of the data the model was built on
    df, est = votes_fit
    reversed_df = df[df.columns[::-1]]
    model = latent_class_model(reversed_df, n_components=2)
    iv = initvals(model, est, jitter=0.0)[0]
    got = _start_factors(iv, est.variable_names_)
    for name, a in zip(est.variable_names_, est.factors_, strict=True):
        clipped = np.maximum(a, 1e-4) / np.maximum(a, 1e-4).sum(axis=0)
        np.testing.assert_allclose(got[name], clipped, atol=1e-12, err_msg=name)
    # the alignment reference is bound the same way: aligning draws equal to the
    # estimate (classes swapped) gives back the estimate's labels
    post = {"weights": est.weights_[::-1][None, None]}
    post |= {factor_var_name(n): a.T[::-1][None, None] for n, a in got.items()}
    data = model_data(model)[0]
    idata = az.from_dict(
        {"posterior": post},
        dims={"weights": ["class"]}
        | {factor_var_name(n): ["class", f"{n}_category"] for n in data.names},
        coords=dict(
            zip([f"{n}_category" for n in data.names], data.categories, strict=True)
        ),
    )
    aligned = align_labels(idata, est, data, n_refine=0)
    np.testing.assert_allclose(aligned.posterior["weights"].values[0, 0], est.weights_)


def test_start_follows_category_labels_in_another_order(votes_fit):
    import pandas as pd

    df, est = votes_fit
    name = est.variable_names_[1]
    labels = est.category_labels_[1]
    relabelled = df.copy()
    relabelled[name] = pd.Categorical(df[name], categories=labels[::-1])
    model = latent_class_model(relabelled, n_components=2)
    iv = initvals(model, est, jitter=0.0)[0]
    a = est.factors_[1]
    clipped = np.maximum(a, 1e-4) / np.maximum(a, 1e-4).sum(axis=0)
    np.testing.assert_allclose(_start_factors(iv, [name])[name], clipped[::-1], atol=1e-12)


def test_start_that_does_not_fit_the_model_is_refused(votes_fit):
    df, est = votes_fit
    model = latent_class_model(df.drop(columns=df.columns[0]), n_components=2)
    with pytest.raises(DataValidationError, match=r"does not fit the model.*missing"):
        initvals(model, est)
    # a dict with names is bound like an estimator
    point = {
        "weights": est.weights_,
        "factors": est.factors_[::-1],
        "names": est.variable_names_[::-1],
        "categories": est.category_labels_[::-1],
    }
    model = latent_class_model(df, n_components=2)
    a = initvals(model, point, jitter=0.0)[0]
    b = initvals(model, est, jitter=0.0)[0]
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def test_posterior_functions_bind_rows_by_name(small):
    import pandas as pd

    data, _ = small
    rng = np.random.default_rng(3)
    n_components = 2
    names = list(data.names)
    # a point-mass posterior with distinct factors per variable
    w = rng.dirichlet(np.ones(n_components))
    factors = [
        rng.dirichlet(np.ones(k), size=n_components) for k in data.n_categories
    ]  # (F, I)
    post = {"weights": np.tile(w, (1, 3, 1))}
    post |= {factor_var_name(n): np.tile(a, (1, 3, 1, 1)) for n, a in zip(names, factors)}
    idata = az.from_dict(
        {"posterior": post},
        dims={"weights": ["class"]}
        | {factor_var_name(n): ["class", f"{n}_category"] for n in names},
        coords=dict(zip([f"{n}_category" for n in names], data.categories, strict=True)),
    )
    rows = data[:20]
    want = posterior_predict_proba(idata, rows, names[0], model_data=data)
    shuffled = rows.select_variables(names[::-1])
    got = posterior_predict_proba(idata, shuffled, names[0], model_data=data)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    frame = rows.to_pandas()[names[::-1]]
    got = posterior_predict_proba(idata, frame, names[0], model_data=data)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # class membership from a DataFrame, and a variable the model does not have
    idata.posterior.attrs["bayespmf_variables"] = names
    member = posterior_class_proba(idata, frame)
    np.testing.assert_allclose(
        member["mean"].values, posterior_class_proba(idata, rows)["mean"].values
    )
    with pytest.raises(DataValidationError, match="not variables of the fitted data"):
        posterior_class_proba(idata, frame.assign(extra=pd.Series(["a"] * 20)))
