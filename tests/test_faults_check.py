"""Issue 24, items 4 and 5: no silently ignored argument, scale-free weights, a --check
that checks what the run would."""

import inspect
import warnings

import numpy as np
import pandas as pd
import pymc as pm
import pytest

from bayespmf import DataValidationError, LatentClassPMF
from bayespmf.apps.cli import main
from bayespmf.apps.spec import SpecError, load_spec
from bayespmf.apps.tasks import check_task_inputs, classify
from bayespmf.datasets import make_latent_class, make_simplex_nest
from bayespmf.fit import fit_latent_class
from bayespmf.fit.covariates import fit_latent_class_regression
from bayespmf.models import _sampling, latent_class_model, sample
from bayespmf.models.regression import latent_class_regression_model
from bayespmf.models.simplex_nest import simplex_nest_model

# ----------------------------------------------------------------- item 4: sample()

#: small enough that a refused call costs only the point estimate
OPTIONS = dict(draws=5, tune=5, chains=1, cores=1, random_seed=0, progressbar=False)


@pytest.fixture(scope="module")
def small():
    data, _ = make_latent_class(
        80, [2, 3, 2], n_components=2, observed_prob=0.9, random_state=0
    )
    return data


@pytest.fixture
def no_sampling(monkeypatch):
    """pm.sample and pm.fit raise: a refusal must come before any sampling."""
    _sampling.check_sample_kwargs("nuts", {})  # the signatures read before patching
    _sampling.check_sample_kwargs("advi", {})

    def boom(*args, **kwargs):
        raise AssertionError("the sampler ran although the arguments are bad")

    monkeypatch.setattr(pm, "sample", boom)
    monkeypatch.setattr(pm, "fit", boom)


def test_misspelt_keyword_is_refused_with_the_valid_ones(small, no_sampling):
    model = latent_class_model(small, n_components=2)
    with pytest.raises(DataValidationError, match="misspelt_keyword") as info:
        sample(model, misspelt_keyword=1, **OPTIONS)
    msg = str(info.value)
    assert "'target_accept'" in msg and "'max_treedepth'" in msg  # the valid ones
    # a near miss of a real option, and a bad key inside nuts={...}
    with pytest.raises(DataValidationError, match="target_acept"):
        sample(model, target_acept=0.9, **OPTIONS)
    with pytest.raises(DataValidationError, match=r"'nuts'.*\['bogus'\].*max_treedepth"):
        sample(model, nuts={"bogus": 1}, **OPTIONS)


def test_other_families_refuse_unknown_keywords_before_their_point_estimate(
    small, no_sampling, monkeypatch
):
    from bayespmf.models import regression, simplex_nest

    def no_fit(*args, **kwargs):
        raise AssertionError("the point estimate ran although the arguments are bad")

    monkeypatch.setattr(regression, "LatentClassRegression", no_fit)
    monkeypatch.setattr(simplex_nest, "_point_of", no_fit)
    z = pd.DataFrame({"age": np.random.default_rng(0).normal(size=small.n_samples)})
    X, _ = make_simplex_nest(40, 4, 3, alpha=2.0, sigma=0.1, random_state=1)
    for model in (
        latent_class_model(small, n_components=2, covariates=z),
        simplex_nest_model(X, 3, alpha=2.0),
    ):
        with pytest.raises(DataValidationError, match="misspelt_keyword"):
            sample(model, misspelt_keyword=1, **OPTIONS)
    with pytest.raises(ValueError, match=r"'advi_iterations'.*>= 1"):
        sample(simplex_nest_model(X, 3, alpha=2.0), method="advi", advi_iterations=0)


def test_advi_refuses_zero_iterations_and_nuts_options(small, no_sampling):
    model = latent_class_model(small, n_components=2)
    advi = dict(method="advi", draws=5, random_seed=0, progressbar=False)
    for bad in (0, -3):
        with pytest.raises(ValueError, match=r"'advi_iterations'.*>= 1"):
            sample(model, advi_iterations=bad, **advi)
    with pytest.raises(DataValidationError, match=r"\['target_accept'\] are NUTS options"):
        sample(model, advi_iterations=10, target_accept=0.9, **advi)
    with pytest.raises(DataValidationError, match=r"'obj_optimizer'"):  # listed as valid
        sample(model, advi_iterations=10, misspelt_keyword=1, **advi)
    with pytest.raises(DataValidationError, match="nuts_sampler='nutpie' applies to"):
        _sampling.check_sample_kwargs("advi", {"nuts_sampler": "nutpie"})


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"draws": 0}, r"'draws'.*>= 1"),
        ({"draws": -1}, r"'draws'.*>= 1"),
        ({"tune": -1}, r"'tune'.*>= 0"),
        ({"chains": 0}, r"'chains'.*>= 1"),
    ],
)
def test_nuts_refuses_empty_runs(small, no_sampling, bad, match):
    with pytest.raises(ValueError, match=match):
        sample(small, n_components=2, **(OPTIONS | bad))


def test_the_keywords_pm_sample_takes_still_pass():
    # pm.sample's own keywords (less those sample() sets) and PyMC's documented NUTS
    # options, directly and in nuts={...}
    own = set(inspect.signature(pm.sample).parameters) - {
        "draws",
        "tune",
        "chains",
        "initvals",
        "random_seed",
        "progressbar",
        "compute_convergence_checks",
        "model",
        "return_inferencedata",
        "kwargs",
    }
    documented = {"target_accept", "max_treedepth", "step_scale", "early_max_treedepth"}
    for key in own | documented:
        _sampling.check_sample_kwargs("nuts", {key: None})
    _sampling.check_sample_kwargs("nuts", {"nuts": dict.fromkeys(documented, 1)})
    # ADVI: pm.fit's options (passed on now; they were dropped before)
    for key in ("obj_optimizer", "total_grad_norm_constraint", "callbacks", "obj_n_mc"):
        _sampling.check_sample_kwargs("advi", {key: None})


@pytest.mark.slow
def test_a_nuts_option_reaches_the_sampler(small):
    # max_treedepth=2 caps every draw's tree at depth 2 (default 10)
    idata = sample(
        small,
        n_components=2,
        max_treedepth=2,
        target_accept=0.9,
        log_likelihood=False,
        **(OPTIONS | {"draws": 20, "tune": 20}),
    )
    assert int(idata.sample_stats["tree_depth"].max()) <= 2


def test_model_factories_refuse_what_they_would_ignore(small):
    z = np.random.default_rng(0).normal(size=(small.n_samples, 1))
    with pytest.raises(DataValidationError, match=r"\['weights_prior'\]"):
        latent_class_model(small, 2, covariates=z, weights_prior=2.0)
    with pytest.raises(DataValidationError, match=r"\['coords'\]"):
        latent_class_model(small, 2, covariates=z, coords={"extra": [0, 1]})
    X, _ = make_simplex_nest(30, 4, 3, alpha=2.0, sigma=0.1, random_state=1)
    with pytest.raises(DataValidationError, match=r"'topic_concentration'.*multinomial"):
        simplex_nest_model(X, 3, kernel="gaussian", topic_concentration=0.5)
    for factory, args in (
        (latent_class_model, (small, 2)),
        (latent_class_regression_model, (small, z, 2)),
        (simplex_nest_model, (X, 3)),
    ):
        with pytest.raises(TypeError, match="misspelt_keyword"):
            factory(*args, misspelt_keyword=1)


# ---------------------------------------------------------- item 4: sample_weight


def _weighted_loglik(codes, weights, factors, w):
    """sum_s w_s log sum_f lambda_f prod_{n observed} A_n(x_sn, f), in plain NumPy."""
    like = np.tile(np.asarray(weights, float), (codes.shape[0], 1))
    for n, a in enumerate(factors):
        seen = codes[:, n] >= 0
        like[seen] *= np.asarray(a)[codes[seen, n]]
    return float(np.sum(w * np.log(like.sum(axis=1))))


@pytest.fixture(scope="module")
def rows():
    data, _ = make_latent_class(200, [2, 3, 2, 2], n_components=2, random_state=0)
    return np.asarray(data.codes), list(data.n_categories)


@pytest.mark.parametrize("method", ["auto", "em"])
def test_weights_are_scale_invariant(rows, method):
    codes, n_cat = rows
    S = codes.shape[0]
    varied = np.random.default_rng(1).uniform(0.5, 2.0, size=S)

    def fit(w):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a local-optimum note is not the point
            return fit_latent_class(
                codes, 2, method, n_categories=n_cat, random_state=0, sample_weight=w
            )

    # all weights equal: w / mean(w) is exactly 1, so every scale fits as unit weights
    ref = fit(np.ones(S))
    for scale in (1e-200, 1e200):
        got = fit(np.full(S, scale))
        np.testing.assert_allclose(got.params.weights, ref.params.weights, rtol=1e-10)
        for a, b in zip(got.params.factors, ref.params.factors, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
        # the log-likelihood is that of the caller's weights, sum_s w_s log p(x_s)
        assert got.loglik == pytest.approx(scale * ref.loglik, rel=1e-10)
        direct = _weighted_loglik(codes, *got.params, np.full(S, scale))
        assert got.loglik == pytest.approx(direct, rel=1e-10)
        np.testing.assert_allclose(got.loglik_trace, scale * ref.loglik_trace, rtol=1e-10)
        if method == "auto":  # the same optima, on the caller's scale
            assert len(got.optima) == len(ref.optima)
            np.testing.assert_allclose(
                got.optima["loglik"], scale * ref.optima["loglik"], rtol=1e-10
            )
    # unequal weights: scaled, they differ from the unscaled ones by rounding only
    # (the same optimum; "auto" may keep another start of it, its classes permuted)
    ref = fit(varied)
    for scale in (1e-200, 1e200):
        got = fit(scale * varied)
        perm = np.argsort(got.params.weights)[np.argsort(np.argsort(ref.params.weights))]
        np.testing.assert_allclose(got.params.weights[perm], ref.params.weights, rtol=1e-8)
        for a, b in zip(got.params.factors, ref.params.factors, strict=True):
            np.testing.assert_allclose(a[:, perm], b, rtol=1e-8, atol=1e-8)
        assert got.loglik == pytest.approx(scale * ref.loglik, rel=1e-10)
        direct = _weighted_loglik(codes, *got.params, scale * varied)
        assert got.loglik == pytest.approx(direct, rel=1e-10)
    # unit weights are the unweighted fit: the MLE, not [0.5, 0.5]
    plain = fit(None)
    tiny = fit(np.full(S, 1e-200))
    assert tiny.loglik / 1e-200 == pytest.approx(plain.loglik, rel=1e-8)
    assert abs(tiny.params.weights[0] - 0.5) > 0.05


def test_estimator_weights_scale_invariant_and_frequencies_kept(rows):
    codes, n_cat = rows
    kw = {"n_categories": n_cat}
    unit = LatentClassPMF(2, random_state=0).fit(codes, sample_weight=np.ones(len(codes)))
    huge = LatentClassPMF(2, random_state=0).fit(
        codes, sample_weight=np.full(len(codes), 1e200), **kw
    )
    np.testing.assert_allclose(huge.weights_, unit.weights_, rtol=1e-10)
    assert huge.loglik_ == pytest.approx(1e200 * unit.loglik_, rel=1e-10)
    # frequency weights still equal the expanded rows (log-likelihood and estimate)
    patterns, counts = np.unique(codes, axis=0, return_counts=True)
    freq = LatentClassPMF(2, random_state=0).fit(patterns, sample_weight=counts, **kw)
    assert freq.loglik_ == pytest.approx(unit.loglik_, rel=1e-9)
    np.testing.assert_allclose(np.sort(freq.weights_), np.sort(unit.weights_), atol=1e-6)


def test_regression_weights_scale_invariant():
    rng = np.random.default_rng(0)
    S = 300
    z = rng.normal(size=(S, 1))
    h = (rng.random(S) < 1 / (1 + np.exp(-2 * z[:, 0]))).astype(int)
    x = (rng.random((S, 4)) < np.array([0.15, 0.85])[h][:, None]).astype(int)
    kw = dict(n_init=5, random_state=0)
    ref = fit_latent_class_regression(x, z, 2, sample_weight=np.ones(S), **kw)
    for scale in (1e-200, 1e200):
        got = fit_latent_class_regression(x, z, 2, sample_weight=np.full(S, scale), **kw)
        np.testing.assert_allclose(got.params.beta, ref.params.beta, rtol=1e-10)
        assert got.loglik == pytest.approx(scale * ref.loglik, rel=1e-10)
        assert got.loglik_start == pytest.approx(scale * ref.loglik_start, rel=1e-10)
        # the information scales with the weights
        free = np.isfinite(ref.stderr)
        np.testing.assert_allclose(
            got.stderr[free], ref.stderr[free] / np.sqrt(scale), rtol=1e-8
        )
    # a ridge keeps its meaning on the caller's scale: against weights 1e200 it
    # vanishes (the MLE), against 1e-200 it dominates (beta -> 0)
    mle = fit_latent_class_regression(x, z, 2, sample_weight=np.ones(S), **kw)
    big = fit_latent_class_regression(
        x, z, 2, sample_weight=np.full(S, 1e200), ridge=1.0, **kw
    )
    small = fit_latent_class_regression(
        x, z, 2, sample_weight=np.full(S, 1e-200), ridge=1.0, stderr=False, **kw
    )
    np.testing.assert_allclose(big.params.beta, mle.params.beta, rtol=1e-6)
    assert np.abs(small.params.beta[:, 1:]).max() < 1e-6 < np.abs(mle.params.beta).max()


# ------------------------------------------------------------- item 5: run --check


def _spec(tmp_path, text, name="spec.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


BAD_SPECS = [
    ('[data]\nname = "car"\n[fit]\nn_components = 2\ntol = nan\n', "'fit.tol'", "finite"),
    ('[data]\nname = "car"\n[fit]\nn_components = 2\ntol = inf\n', "'fit.tol'", "finite"),
    (
        'seed = -1\n[data]\nname = "car"\n[fit]\nn_components = 2\n',
        "'seed'",
        "non-negative",
    ),
    (
        '[data]\nname = "car"\n[fit]\nn_components = 2\n[sample]\nrandom_seed = -2\n',
        "'sample.random_seed'",
        "non-negative",
    ),
    (
        '[data]\nname = "car"\n[task]\nrandom_state = -3\n',
        "'task.random_state'",
        "non-negative",
    ),
    (
        '[data]\nname = "car"\n[fit]\nn_components = 400\n',
        "'fit.n_components'",
        "Use n_components <= 363",
    ),
    (
        '[data]\nname = "car"\n[fit]\nn_components = [2, 400]\n',
        "'fit.n_components'",
        "Use n_components <= 363",
    ),
    (
        '[data]\nname = "car"\n[task]\ncandidates = [400]\nn_trials = 1\n',
        "'[task]'",
        "Use ranks <= 363",
    ),
    ('[data]\nname = "car"\ntarget = "klass"\n', "'data.target'", "Did you mean 'class'"),
    (
        '[data]\nname = "car"\noptions = { foo = 1 }\n',
        "'data.options.foo'",
        "takes no options",
    ),
    (
        '[data]\nname = "votes"\noptions = { impute = "no" }\n[fit]\nn_components = 2\n',
        "'data.options.impute'",
        "must be of type bool",
    ),
    (
        '[data]\nname = "votes"\noptions = { imputee = true }\n',
        "'data.options.imputee'",
        "Did you mean 'impute'",
    ),
    (
        '[data]\nname = "movielens"\noptions = { genre = "Acton" }\n',
        "'data.options'",
        "Did you mean 'Action'",
    ),
    ('[data]\nname = "movielens"\n', "'data.options'", "give ['genre']"),
    (
        '[data]\nname = "movielens"\noptions = { genre = "Action", n_movies = 1 }\n',
        "'data.options'",
        "'n_movies'",
    ),
]


@pytest.mark.parametrize(("text", "key", "fix"), BAD_SPECS)
def test_check_and_run_refuse_the_same_spec_before_any_work(
    tmp_path, capsys, text, key, fix
):
    p = _spec(tmp_path, text)
    assert main(["run", str(p), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and key in err and fix in err, err
    out = tmp_path / "out"
    assert main(["run", str(p), "--out", str(out), "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert captured.err == err  # the same refusal
    assert captured.out == ""  # no step started
    assert not out.exists()


def test_check_accepts_good_options_and_loads_the_data(tmp_path, capsys, monkeypatch):
    from bayespmf import datasets

    loaded = []
    real = datasets.load
    monkeypatch.setattr(datasets, "load", lambda *a, **k: loaded.append(a) or real(*a, **k))
    for text in (
        '[data]\nname = "votes"\noptions = { impute = true }\n[fit]\nn_components = 3\n',
        '[data]\nname = "movielens"\noptions = { genre = "Action", n_movies = 10 }\n'
        "[fit]\nn_components = [2, 3]\n",
        '[data]\nname = "car"\n[fit]\nn_components = 2\ntol = 1e-6\n'
        '[sample]\nmethod = "advi"\n'
        "[task]\nn_trials = 1\ncandidates = [2, 400]\nposterior = true\n",
    ):
        p = _spec(tmp_path, text)
        assert main(["run", str(p), "--check"]) == 0, capsys.readouterr().err
        assert "valid" in capsys.readouterr().out
    assert [a[0] for a in loaded] == ["votes", "movielens", "car"]


def test_votes_impute_string_is_not_run_imputed(tmp_path):
    p = _spec(tmp_path, '[data]\nname = "votes"\noptions = { impute = "no" }\n')
    with pytest.raises(SpecError, match=r"'data\.options\.impute'.*bool.*'no'"):
        load_spec(p)


def test_task_checks_are_the_tasks_own(monkeypatch):
    # check_task_inputs raises what classify raises, before classify runs a trial
    from bayespmf.apps import tasks

    def no_trial(*args, **kwargs):
        raise AssertionError("a trial ran")

    monkeypatch.setattr(tasks, "ClassifySplit", no_trial)
    for kw in (
        {"random_state": -1},
        {"n_trials": 0},
        {"candidates": []},
        {"methods": ["cnmf-spaa"]},
        {"posterior": {"bogus": 1}},
    ):
        with pytest.raises(ValueError) as by_task:
            classify("car", "class", **kw)
        with pytest.raises(ValueError) as by_check:
            check_task_inputs("classify", "car", "class", **kw)
        assert str(by_check.value) == str(by_task.value)
    with pytest.raises(DataValidationError, match="unexpected keyword argument 'nope'"):
        check_task_inputs("classify", "car", "class", nope=1)


def test_latent_class_sample_refuses_bad_keywords_before_its_point_estimate(
    small, no_sampling, monkeypatch
):
    import bayespmf.estimators as estimators

    class NoFit:
        def __init__(self, *args, **kwargs):
            raise AssertionError("the point estimate ran although the arguments are bad")

    monkeypatch.setattr(estimators, "LatentClassPMF", NoFit)
    model = latent_class_model(small, n_components=2)
    with pytest.raises(DataValidationError, match="misspelt_keyword"):
        sample(model, misspelt_keyword=1, **OPTIONS)
    with pytest.raises(ValueError, match=r"'advi_iterations'.*>= 1"):
        sample(model, method="advi", advi_iterations=0, draws=5, progressbar=False)
    with pytest.raises(ValueError, match="nuts_sampler"):
        sample(model, method="advi", nuts_sampler="numpyro", draws=5, progressbar=False)
