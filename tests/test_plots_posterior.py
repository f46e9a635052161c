import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pytest

from bayespmf.plots import plot_posterior_factors


@pytest.fixture
def idata(rng):
    post = {"weights": rng.dirichlet([5.0] * 3, (2, 40))}
    dims = {"weights": ["class"]}
    coords = {}
    for name, cats in [("colour", ["red", "green"]), ("size", ["S", "M", "L", "XL"])]:
        post[f"A_{name}"] = rng.dirichlet(np.ones(len(cats)), (2, 40, 3))
        dims[f"A_{name}"] = ["class", f"{name}_category"]
        coords[f"{name}_category"] = cats
    return az.from_dict({"posterior": post}, dims=dims, coords=coords)


def test_posterior_factor_plot_labels_and_intervals(idata):
    fig = plot_posterior_factors(idata, hdi_prob=0.5, title="t")
    weights_ax, colour_ax, size_ax = fig.axes
    assert [t.get_text() for t in size_ax.get_xticklabels()] == ["S", "M", "L", "XL"]
    assert colour_ax.get_title() == "colour"
    # one errorbar per class; its markers are the posterior means of each category
    assert len(size_ax.containers) == 3
    means = idata.posterior["A_size"].mean(("chain", "draw")).values
    for f, bars in enumerate(size_ax.containers):
        np.testing.assert_allclose(bars.lines[0].get_ydata(), means[f])
    assert len(weights_ax.get_legend().get_texts()) == 3
    plt.close(fig)


def test_posterior_factor_plot_selects_variables(idata):
    fig = plot_posterior_factors(idata, ["size"])
    assert [ax.get_title() for ax in fig.axes[1:]] == ["size"]
    plt.close(fig)
    fig = plot_posterior_factors(idata, max_variables=1)
    assert len(fig.axes) == 2
    plt.close(fig)
    with pytest.raises(ValueError, match=r"'names' must be variables.*\['shape'\]"):
        plot_posterior_factors(idata, ["shape"])
