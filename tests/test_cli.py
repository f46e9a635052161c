import pytest

from bayespmf.apps.cli import main
from bayespmf.apps.spec import SpecError, load_spec


def write(tmp_path, text, name="spec.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_shipped_specs_are_valid():
    import pathlib

    specs = sorted(pathlib.Path(__file__).parents[1].joinpath("models").glob("*.toml"))
    assert specs, "models/ must ship specifications"
    for p in specs:
        spec = load_spec(p)
        assert spec.data["name"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            '[data]\nname = "car"\n[fit]\nn_component = 3\n',
            r"unknown key 'fit\.n_component'\. Did you mean 'n_components'",
        ),
        (
            '[data]\nname = "car"\n[fitt]\nn_components = 3\n',
            r"unknown section \[fitt\]\. Did you mean 'fit'",
        ),
        (
            '[data]\nname = "car"\n[fit]\nn_components = "3"\n',
            r"'fit\.n_components' must be of type int",
        ),
        (
            '[data]\nname = "car"\n[fit]\nn_components = 0\n',
            r"'fit\.n_components' must be >= 1",
        ),
        ('[data]\nname = "cars"\n', r"'data\.name'.*Did you mean 'car'"),
        ("[fit]\nn_components = 3\n", r"missing section \[data\]"),
        ("[data]\n", r"missing required key 'data\.name'"),
        ("[data\nname=", "not valid TOML"),
    ],
)
def test_bad_specs_fail_with_key_and_file(tmp_path, text, match):
    p = write(tmp_path, text)
    with pytest.raises(SpecError, match=match) as info:
        load_spec(p)
    assert str(p) in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="file not found"):
        load_spec(tmp_path / "nope.toml")


def test_cli_reports_errors_without_traceback(tmp_path, capsys):
    p = write(tmp_path, '[data]\nname = "car"\n[fit]\nn_component = 3\n')
    assert main(["run", str(p)]) == 2
    err = capsys.readouterr().err
    assert "bayespmf: error:" in err and "n_component" in err


def test_cli_datasets(capsys):
    assert main(["datasets", "votes"]) == 0
    assert "Congressional" in capsys.readouterr().out
    assert main(["datasets", "vote"]) == 2
    assert "Did you mean 'votes'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('sed = 1\n[data]\nname = "car"\n', r"unknown key 'sed'\. Did you mean 'seed'"),
        ('[data]\nname = "car"\n[fit]\n[sample]\ndraw = 9\n', r"'sample\.draw'.*'draws'"),
        (
            '[data]\nname = "car"\n[fit]\n[sample]\nmethod = "hmc"\n',
            r"'sample\.method' must be one of \['nuts', 'gibbs', 'advi'\]",
        ),
        ('[data]\nname = "car"\n[sample]\n', r"\[sample\] needs a \[fit\] section"),
        (
            '[data]\nname = "car"\n[fit]\n[sample]\nchains = 0\n',
            r"'sample\.chains' must be >= 1",
        ),
        (
            '[data]\nname = "car"\n[task]\ncandidates = ["3"]\n',
            r"'task\.candidates' must be of type list of int",
        ),
        ('[data]\nname = "car"\n[task]\nkind = "regress"\n', r"'task\.kind' must be one"),
        (
            '[data]\nname = "car"\n[task]\nmethods = ["cnmf-spaa"]\n',
            r"'task\.methods'.*Did you mean 'cnmf-spa'",
        ),
        (
            '[data]\nname = "movielens"\n[task]\nbaselines = ["naive-bayes"]\n',
            r"'task\.baselines' must be one of \['global-average'",
        ),
        (
            '[data]\nname = "car"\n[fit]\nn_components = [3, 0]\n',
            r"'fit\.n_components' must be >= 1",
        ),
        ('[data]\nname = "car"\n[output]\nfigures = 1\n', r"'output\.figures'.*bool"),
        (
            '[data]\nname = "car"\ntest_fraction = 1.5\n',
            r"'data\.test_fraction' must be in",
        ),
        ("data = 3\n", r"'data' must be a table \[data\]"),
        (
            '[data]\nname = "car"\n[fit]\n[sample]\ntarget_ess = 400\n',
            r"'\[sample\]'.*'target_ess' is not available with method='nuts'",
        ),
        (
            '[data]\nname = "car"\n[fit]\n[sample]\nmethod = "gibbs"\nmax_time = 60\n',
            r"'max_time'.*applies with 'target_ess' only",
        ),
        (
            '[data]\nname = "car"\n[fit]\n[sample]\nmethod = "gibbs"\ntarget_ess = -1\n',
            r"'target_ess'.*above 0",
        ),
    ],
)
def test_bad_extended_specs(tmp_path, text, match):
    p = write(tmp_path, text)
    with pytest.raises(SpecError, match=match) as info:
        load_spec(p)
    assert str(p) in str(info.value)


def test_spec_defaults_follow_seed(tmp_path):
    p = write(tmp_path, 'seed = 4\n[data]\nname = "car"\n[fit]\n[sample]\n[task]\n')
    spec = load_spec(p)
    assert spec.fit["random_state"] == spec.sample["random_seed"] == 4
    assert spec.task["random_state"] == 4 and spec.task["kind"] == "classify"
    assert spec.sample["method"] == "nuts" and spec.sample["chains"] == 2


def test_bad_spec_fails_before_any_work(tmp_path, capsys):
    out = tmp_path / "out"
    p = write(tmp_path, '[data]\nname = "car"\n[task]\nn_trials = 0\n')
    assert main(["run", str(p), "--out", str(out)]) == 2
    assert "'task.n_trials' must be >= 1" in capsys.readouterr().err
    assert not out.exists()


def test_check_flag(tmp_path, capsys):
    p = write(tmp_path, '[data]\nname = "car"\n')
    assert main(["run", str(p), "--check"]) == 0
    assert "valid" in capsys.readouterr().out


def test_run_writes_estimate_task_and_figures(tmp_path):
    import json

    import numpy as np
    import pandas as pd
    import xarray as xr

    from bayespmf.estimators import LatentClassPMF

    out = tmp_path / "out"
    p = write(
        tmp_path,
        "seed = 3\n"
        '[data]\nname = "votes"\n'
        '[fit]\nn_components = 3\nmethod = "cnmf-spa-em"\n'
        '[task]\nn_trials = 1\ncandidates = [2, 3]\nmethods = ["cnmf-spa"]\n'
        'baselines = ["naive-bayes"]\n',
    )
    assert main(["run", str(p), "--out", str(out), "--no-progress"]) == 0
    for f in [
        "summary.csv",
        "fit.npz",
        "estimate.nc",
        "factors.png",
        "task.csv",
        "task.md",
        "task.png",
        "results.json",
    ]:
        assert (out / f).is_file(), f
    est = LatentClassPMF.load(out / "fit.npz")
    with xr.open_dataset(out / "estimate.nc", engine="h5netcdf") as ds:
        np.testing.assert_allclose(ds["weights"].values, est.weights_)
        np.testing.assert_allclose(ds["A_class"].values, est.factors_[0].T)
    table = pd.read_csv(out / "task.csv", index_col=0)
    assert list(table.index) == ["cnmf-spa", "naive-bayes"]
    assert (out / "task.md").read_text().startswith("| method |")
    res = json.loads((out / "results.json").read_text())
    assert res["fit"]["n_components"] == 3 and res["task"]["kind"] == "classify"


@pytest.mark.slow
def test_run_with_advi_writes_posterior(tmp_path):
    import arviz as az

    out = tmp_path / "out"
    p = write(
        tmp_path,
        '[data]\nname = "car"\n[fit]\nn_components = 2\n'
        '[sample]\nmethod = "advi"\nadvi_iterations = 300\ndraws = 50\n',
    )
    assert main(["run", str(p), "--out", str(out), "--no-progress"]) == 0
    idata = az.from_netcdf(out / "posterior.nc", engine="h5netcdf")
    assert idata.posterior.sizes["draw"] == 50
    assert (out / "trace.png").is_file()


def test_run_with_gibbs_checks_convergence(tmp_path):
    import json

    import arviz as az

    out = tmp_path / "out"
    p = write(
        tmp_path,
        '[data]\nname = "car"\n[fit]\nn_components = 2\n'
        '[sample]\nmethod = "gibbs"\ndraws = 60\ntune = 20\nchains = 2\nn_sweeps = 2\n',
    )
    assert main(["run", str(p), "--out", str(out), "--no-progress"]) == 0
    idata = az.from_netcdf(out / "posterior.nc", engine="h5netcdf")
    assert idata.posterior.sizes["draw"] == 60 and idata.posterior.sizes["chain"] == 2
    assert idata.posterior.attrs["sampling_method"] == "gibbs"
    sampled = json.loads((out / "results.json").read_text())["sample"]
    assert sampled["method"] == "gibbs" and "r_hat_max" in sampled
    assert (out / "convergence.json").is_file()


def test_sample_section_samples_to_a_target(tmp_path, capsys):
    """[sample] target_ess / target_rhat / max_time reach sample(); the run reports them."""
    import json

    import arviz as az

    from bayespmf.apps.run import _sample
    from bayespmf.datasets import load_car
    from bayespmf.estimators import LatentClassPMF

    p = write(
        tmp_path,
        '[data]\nname = "car"\n[fit]\nn_components = 2\n[sample]\nmethod = "gibbs"\n'
        "draws = 30\ntune = 10\nchains = 2\ncores = 1\nn_sweeps = 1\n"
        "target_ess = 40\ntarget_rhat = 1.1\nmax_time = 60\n[output]\nfigures = false\n",
    )
    spec = load_spec(p)
    assert (spec.sample["target_ess"], spec.sample["max_time"]) == (40.0, 60.0)
    assert spec.sample["target_rhat"] == 1.1
    default = write(
        tmp_path,
        '[data]\nname = "car"\n[fit]\n[sample]\nmethod = "gibbs"\ntarget_ess = 40\n',
        name="default.toml",
    )
    assert load_spec(default).sample["target_rhat"] == 1.01  # filled in
    train = load_car().data[:300].drop_empty_rows()
    est = LatentClassPMF(2, n_init=2, random_state=0).fit(train)
    metrics, written = {}, []
    idata, _ = _sample(
        spec, train, None, est, train, train, tmp_path, metrics, written, False
    )
    attrs = idata.posterior.attrs
    assert metrics["sample"]["target_reached"] == bool(attrs["target_reached"])
    assert metrics["sample"]["batches"] == attrs["target_batches"]
    assert metrics["sample"]["draws_per_chain"] == sum(attrs["target_batches"]) >= 30
    assert attrs["target_ess"] == 40.0 and attrs["target_rhat"] == 1.1
    assert (
        "then on to r-hat <= 1.1 and bulk ESS >= 40, at most 60 s"
        in capsys.readouterr().out
    )
    back = az.from_netcdf(tmp_path / "posterior.nc", engine="h5netcdf")
    assert back.posterior.sizes["draw"] == sum(attrs["target_batches"])
    assert back.posterior.attrs["target_reached"] == attrs["target_reached"]
    json.dumps(metrics)  # what results.json holds
