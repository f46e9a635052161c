"""Helpers shared by the benchmark scripts: a wall-clock timer and the StepMix peer.

The scripts run from ``benchmarks/`` (``python benchmarks/<script>.py``), so they import
this module as ``_common``. StepMix is the optional peer of the ``peers`` extra
(``pip install -e ".[peers]"``); it is imported only when a fit asks for it.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``(result, wall seconds)`` of one call ``fn(*args, **kwargs)``.

    Examples
    --------
    >>> out, seconds = timed(sum, [1, 2, 3])
    >>> out, seconds >= 0.0
    (6, True)
    """
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def stepmix_input(codes: np.ndarray) -> np.ndarray:
    """Integer codes as floats with NaN for missing (StepMix's ``categorical_nan``).

    Examples
    --------
    >>> stepmix_input(np.array([[0, -1], [2, 1]]))
    array([[ 0., nan],
           [ 2.,  1.]])
    """
    codes = np.asarray(codes)
    x = codes.astype(float)
    x[codes < 0] = np.nan
    return x


def fit_stepmix(x: np.ndarray, n_components: int, z: np.ndarray | None = None, **options):
    """Fit StepMix's ``categorical_nan`` model quietly; ``(model, wall seconds)``.

    ``x`` comes from :func:`stepmix_input`; ``z`` (covariates) is passed to ``fit`` when
    given, for ``structural="covariate"``. ``options`` go to ``StepMix`` as they are
    (``n_init``, ``max_iter``, tolerances, ``random_state``, ...); progress output is
    off and StepMix's warnings are silenced, as in every script that called it before.
    Only the ``fit`` call is timed.

    Examples
    --------
    >>> model, seconds = fit_stepmix(x, 3, n_init=10, random_state=0)  # doctest: +SKIP
    """
    from stepmix.stepmix import StepMix

    model = StepMix(
        n_components=n_components,
        measurement="categorical_nan",
        verbose=0,
        progress_bar=0,
        **options,
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if z is None:
            model.fit(x)
        else:
            model.fit(x, z)
    return model, time.perf_counter() - start


def stepmix_to_bayespmf(model, n_categories) -> tuple[np.ndarray, list]:
    """StepMix's fitted parameters as bayespmf ``(weights (F,), [A_n (I_n, F)])``.

    StepMix's categorical measurement model stores ``pis`` of shape (F, N * L) with
    ``pis[f, n * L + i] = Pr(x_n = i | class f)``, where ``L`` (``max_n_outcomes``) is the
    largest alphabet size seen in the data; variable ``n`` uses the first ``I_n`` of its
    ``L`` slots. Categories above the largest code in the data get probability 0.

    Examples
    --------
    >>> weights, factors = stepmix_to_bayespmf(model, data.n_categories)  # doctest: +SKIP
    """
    params = model.get_parameters()
    weights = np.asarray(params["weights"], dtype=float)
    pis = np.asarray(params["measurement"]["pis"], dtype=float)
    width = int(params["measurement"]["max_n_outcomes"])
    factors = []
    for n, size in enumerate(np.asarray(n_categories, dtype=int)):
        a = pis[:, n * width : (n + 1) * width].T  # (L, F)
        if a.shape[0] < size:
            a = np.vstack([a, np.zeros((size - a.shape[0], a.shape[1]))])
        factors.append(a[:size])
    return weights, factors


def parse_args_quick(parser: argparse.ArgumentParser, argv=None, **quick: Any):
    """Parse ``argv`` with a ``--quick`` flag that sets the options in ``quick``.

    ``--quick`` is the smoke run of a benchmark (``tests/test_benchmarks.py`` runs it):
    small data, few repeats, the same code path and the same printed table. The values
    it sets (``dest=value``) replace whatever the command line gave for them, and are
    listed in ``--help``.

    Examples
    --------
    >>> def parser():
    ...     p = argparse.ArgumentParser()
    ...     _ = p.add_argument("--trials", type=int, default=20)
    ...     return p
    >>> parse_args_quick(parser(), ["--quick"], trials=2).trials
    2
    >>> parse_args_quick(parser(), [], trials=2).trials
    20
    """
    sizes = ", ".join(f"--{key.replace('_', '-')} {value}" for key, value in quick.items())
    parser.add_argument(
        "--quick", action="store_true", help=f"smoke run on small data ({sizes})"
    )
    args = parser.parse_args(argv)
    if args.quick:
        for dest, value in quick.items():
            setattr(args, dest, value)
    return args
