import numpy as np
import pandas as pd
import pytest

from bayespmf import DataValidationError
from bayespmf.datasets import make_latent_class
from bayespmf.estimators import LatentClassPMF, best_n_components, compare_n_components
from bayespmf.plots import plot_n_components_selection
from bayespmf.pmf import log_likelihood_rows


@pytest.fixture(scope="module")
def two_classes():
    data, _ = make_latent_class(
        600,
        [3, 3, 4, 3, 3],
        n_components=2,
        factor_prior="separable",
        epsilon=0.1,
        random_state=0,
    )
    return data


@pytest.fixture(scope="module")
def table(two_classes):
    return compare_n_components(
        two_classes, [1, 2, 3], n_init=20, random_state=0, test_fraction=0.3
    )


def test_criteria_equal_an_independent_computation(two_classes, table):
    codes = np.asarray(two_classes.codes)
    n_rows = int((codes >= 0).any(axis=1).sum())
    for r in (1, 2, 3):
        est = LatentClassPMF(r, n_init=20, random_state=0).fit(two_classes)
        ll = log_likelihood_rows(codes, est.weights_, est.factors_).sum()
        k = r * (1 + sum(i - 1 for i in two_classes.n_categories)) - 1
        row = table.loc[r]
        assert row["loglik"] == pytest.approx(ll, rel=1e-10)
        assert row["n_parameters"] == k
        assert row["aic"] == pytest.approx(-2 * ll + 2 * k, rel=1e-10)
        assert row["bic"] == pytest.approx(-2 * ll + k * np.log(n_rows), rel=1e-10)
        assert row["caic"] == pytest.approx(-2 * ll + k * (np.log(n_rows) + 1), rel=1e-10)
        assert row["sabic"] == pytest.approx(
            -2 * ll + k * np.log((n_rows + 2) / 24), rel=1e-10
        )
    # more classes never fit worse in sample; two planted classes: BIC and AIC pick 2
    assert (np.diff(table["loglik"].to_numpy()) > -1e-6).all()
    assert best_n_components(table, "bic") == 2
    assert table.loc[1, "relative_entropy"] == 1.0
    assert np.isfinite(table["heldout_loglik"]).all()


def test_best_rank_direction_and_errors():
    t = pd.DataFrame(
        {"bic": [3.0, 1.0, 2.0], "heldout_loglik": [-3.0, -2.5, -2.0]},
        index=pd.Index([1, 2, 3], name="n_components"),
    )
    assert best_n_components(t, "bic") == 2  # lowest criterion
    assert best_n_components(t, "heldout_loglik") == 3  # highest fit
    with pytest.raises(DataValidationError, match="'criterion'"):
        best_n_components(t, "aic")  # not in the table


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"candidates": []}, "'candidates'"),
        ({"candidates": [0, 1]}, "candidates"),
        ({"test_fraction": 1.5}, "'test_fraction'"),
    ],
)
def test_bad_arguments(two_classes, kwargs, match):
    kw = {"candidates": [1, 2]} | kwargs
    with pytest.raises(ValueError, match=match):
        compare_n_components(two_classes, **kw)


def test_plot_has_a_panel_per_kind_of_column(table):
    import matplotlib

    matplotlib.use("Agg")
    fig = plot_n_components_selection(table)
    assert len(fig.axes) == 2  # criteria, held-out fit
    with_p = table.assign(blrt_p=[np.nan, 0.01, 0.6])
    assert len(plot_n_components_selection(with_p).axes) == 3


def test_select_rank_reports_every_criterion_and_picks_by_the_one_asked(two_classes):
    from bayespmf.models import select_n_components

    table, best = select_n_components(two_classes, [1, 2, 3], n_init=20, random_seed=0)
    assert {"loglik", "aic", "bic", "caic", "sabic", "heldout_loglik"} <= set(table.columns)
    assert best == int(table["heldout_loglik"].idxmax())
    _, by_bic = select_n_components(
        two_classes, [1, 2, 3], criterion="bic", n_init=20, random_seed=0
    )
    assert by_bic == int(table["bic"].idxmin()) == 2
    with pytest.raises(ValueError, match="'criterion'"):
        select_n_components(two_classes, [1, 2], criterion="waic")
