"""scikit-learn's estimator checks for LatentClassPMF, VLAD, GDM and SimplexSPA.

``parametrize_with_checks`` runs every check of ``sklearn.utils.estimator_checks`` on a
small instance of each estimator. The checks that cannot pass are listed, with a
one-line reason, in ``EXPECTED_FAILED_CHECKS``; they run as non-strict ``xfail``. The
simplex estimators' module docstring ("scikit-learn conventions") repeats their
entries.
"""

import numpy as np
import pytest
import sklearn.exceptions
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from bayespmf.datasets._simulate import make_simplex_nest
from bayespmf.estimators.latent_class import LatentClassPMF, NotFittedError
from bayespmf.estimators.simplex import GDM, VLAD, SimplexSPA

#: scikit-learn sets ``n_components = 1`` in these checks; a simplex needs two vertices.
_ONE_VERTEX = (
    "sets n_components=1; a simplex nest needs at least two vertices, so fit refuses "
    "it with DataValidationError"
)
#: Shared by the three simplex estimators.
_SIMPLEX = {
    "check_dtype_object": (
        "non-numeric entries raise DataValidationError (a ValueError, the package's "
        "error for malformed data), not the TypeError of np.asarray"
    ),
} | {
    name: _ONE_VERTEX
    for name in (
        "check_dont_overwrite_parameters",
        "check_fit2d_1feature",
        "check_fit2d_1sample",
        "check_fit2d_predict1d",
        "check_methods_sample_order_invariance",
        "check_methods_subset_invariance",
    )
}
#: VLAD and GDM: ``max_iter`` caps the Lloyd iterations of each k-means restart.
_KMEANS = {
    "check_transformer_n_iter": (
        "max_iter caps the Lloyd iterations of each k-means restart; "
        "bayespmf.kernels.kmeans does not report an iteration count, so there is no "
        "n_iter_"
    ),
}
#: LatentClassPMF.fit accepts and ignores a ``y`` of one entry per row (as scikit-learn
#: does); these checks fit on non-integer floats, not integer category codes (-1 for
#: missing), which the model refuses (DataValidationError).
_Y_REFUSED = (
    "fits on non-integer floats; LatentClassPMF needs integer category codes (-1 for "
    "missing) and refuses other data"
)
_LATENT_CLASS = {
    name: _Y_REFUSED
    for name in (
        "check_all_zero_sample_weights_error",
        "check_complex_data",
        "check_dict_unchanged",
        "check_dont_overwrite_parameters",
        "check_dtype_object",
        "check_estimator_sparse_array",
        "check_estimator_sparse_matrix",
        "check_estimators_dtypes",
        "check_estimators_empty_data_messages",
        "check_estimators_fit_returns_self",
        "check_estimators_nan_inf",
        "check_estimators_overwrite_params",
        "check_estimators_pickle",
        "check_f_contiguous_array_estimator",
        "check_fit2d_1feature",
        "check_fit2d_1sample",
        "check_fit2d_predict1d",
        "check_fit_check_is_fitted",
        "check_fit_idempotent",
        "check_fit_score_takes_y",
        "check_methods_sample_order_invariance",
        "check_methods_subset_invariance",
        "check_n_features_in",
        "check_n_features_in_after_fitting",
        "check_pipeline_consistency",
        "check_positive_only_tag_during_fit",
        "check_readonly_memmap_input",
        "check_sample_weight_equivalence_on_dense_data",
        "check_sample_weights_list",
        "check_sample_weights_not_an_array",
        "check_sample_weights_not_overwritten",
        "check_sample_weights_shape",
    )
}

#: Estimator class -> {check name: why it cannot pass}.
EXPECTED_FAILED_CHECKS = {
    LatentClassPMF: _LATENT_CLASS,
    VLAD: _SIMPLEX | _KMEANS,
    GDM: _SIMPLEX | _KMEANS,
    SimplexSPA: _SIMPLEX,
}

#: Small settings, so that each of the ~47 checks fits in milliseconds. Two vertices:
#: the checks use as few as 1 feature (K <= D + 1) and 2-10 rows.
ESTIMATORS = [
    LatentClassPMF(2, n_init=4, random_state=0),
    VLAD(2, n_init=1, noise_bias="none", random_state=0),
    GDM(2, n_init=1, random_state=0),
    SimplexSPA(2),
]


def _expected_failed(estimator):
    return EXPECTED_FAILED_CHECKS[type(estimator)]


#: The checks fit random data, which holds no simplex: VLAD says so
#: (UnresolvedSimplexWarning); the checks are about the API.
IGNORE_UNRESOLVED = pytest.mark.filterwarnings(
    "ignore::bayespmf.fit.simplex.UnresolvedSimplexWarning"
)


@IGNORE_UNRESOLVED
@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failed)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.slow
@IGNORE_UNRESOLVED
@parametrize_with_checks(
    [VLAD(2, n_init=1, random_state=0)], expected_failed_checks=_expected_failed
)
def test_sklearn_estimator_checks_vlad_default_noise_bias(estimator, check):
    # noise_bias="bootstrap" (the default) simulates and re-clusters the fitted nest
    check(estimator)


def test_every_expected_failure_is_a_real_check():
    # a misspelt or retired check name would silently excuse nothing
    for est in ESTIMATORS:
        decorator = parametrize_with_checks([est])
        names = {check.func.__name__ for _, check in decorator.args[1]}
        assert set(_expected_failed(est)) <= names, type(est).__name__


@pytest.mark.parametrize("cls", [VLAD, GDM, SimplexSPA])
def test_docstring_lists_the_expected_failures(cls):
    """Each class points to its module's "scikit-learn conventions", which names every
    check that the class is expected to fail."""
    import sys

    module_doc = sys.modules[cls.__module__].__doc__
    assert "scikit-learn conventions" in cls.__doc__
    for name in EXPECTED_FAILED_CHECKS[cls]:
        assert f"``{name}``" in module_doc, (cls.__name__, name)


def test_not_fitted_error_is_sklearns():
    assert issubclass(NotFittedError, sklearn.exceptions.NotFittedError)


# --------------------------------------------------------------------------------------
# the conventions the checks do not cover


@pytest.mark.parametrize("cls", [VLAD, GDM, SimplexSPA])
def test_clone_get_set_params(cls):
    est = cls(3, "poisson")
    params = est.get_params()
    assert params["n_components"] == 3 and params["kernel"] == "poisson"
    other = clone(est).set_params(n_components=4)
    assert other.n_components == 4 and est.n_components == 3
    assert repr(est).startswith(f"{cls.__name__}(")


@pytest.mark.parametrize("cls", [VLAD, GDM, SimplexSPA])
def test_invalid_parameters_accepted_until_fit(cls):
    X, _ = make_simplex_nest(50, 3, 2, alpha=1.0, random_state=0)
    est = cls(2, kernel="poison")  # no validation in __init__ ...
    with pytest.raises(ValueError, match=r"'kernel'.*Did you mean 'poisson'"):
        est.fit(X)  # ... but in fit
    est.set_params(kernel="Gaussian").fit(X)
    assert est.kernel == "Gaussian"  # fit does not rewrite a parameter


def test_gridsearchcv_with_score():
    # a triangle nest in 2-D: a segment (2 vertices) leaves the points off it, three
    # vertices cover them, so the held-out reconstruction score picks 3
    X, _ = make_simplex_nest(300, 2, 3, alpha=1.0, sigma=0.01, random_state=0)
    search = GridSearchCV(
        GDM(2, n_init=2, random_state=0), {"n_components": [2, 3]}, cv=3
    ).fit(X)
    assert search.best_params_ == {"n_components": 3}
    scores = search.cv_results_["mean_test_score"]
    assert np.all(scores <= 0) and scores[1] > scores[0]
    assert search.best_estimator_.vertices_.shape == (3, 2)
    assert search.score(X) == pytest.approx(search.best_estimator_.score(X))


def test_in_a_pipeline_with_y():
    # a Pipeline passes y to every step: the unsupervised steps must ignore it
    X, truth = make_simplex_nest(200, 4, 3, alpha=1.0, sigma=0.01, random_state=1)
    y = np.argmax(truth.theta, axis=1)
    theta = make_pipeline(StandardScaler(), SimplexSPA(3)).fit(X, y).transform(X)
    assert theta.shape == (200, 3)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, atol=1e-12)
