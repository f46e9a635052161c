"""The Dirichlet simplex nest in ``bayespmf run``: the ``[simplex]`` section of a spec.

A spec with a ``[simplex]`` section (and no ``[fit]``, ``[sample]`` or ``[task]``,
which are the latent-class model's) runs, on a shipped text corpus (``wikipedia``,
multinomial kernel: topics) or returns panel (``sp500``, Gaussian kernel, in percent):

1. load and split the rows (``data.test_fraction`` held out: at random for a corpus,
   the last days for returns, as in the paper); ``max_rows`` / ``max_words`` take a
   slice (the most frequent words of the kept documents);
2. choose K among ``n_components`` (a list) by held-out completion
   (:func:`bayespmf.fit.simplex_selection.select_simplex_n_components`, VLAD), or take it;
3. fit every method of ``methods`` (VLAD, GDM, SPA) on the training rows and score
   it on the held-out rows: perplexity by document completion and UMass coherence
   (:mod:`bayespmf.fit.topics`) for a corpus, the paper's Frobenius error and the
   simplex volume (:mod:`bayespmf.fit.simplex_metrics`) for returns;
4. NUTS (:func:`bayespmf.models.sample`) on ``nuts_rows`` training rows (and the
   ``nuts_words`` most frequent words), started from VLAD, alpha fixed at VLAD's
   estimate: each vertex's posterior mean and sd (for topics: the top words with
   their probabilities +- sd).

Outputs: ``k_selection.csv`` / ``n_components.png`` (when K is chosen), ``methods.csv``
(and ``methods.md``, written by the run), ``vertices.npz``, ``topics.txt`` (corpus) and
``posterior_vertices.csv``; everything measured goes to ``results.json``.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd
from scipy import sparse

from bayespmf._validation import DataValidationError, check_random_state
from bayespmf.fit.recorded import call_recording_warnings
from bayespmf.fit.simplex import SIMPLEX_METHODS, check_nest_data
from bayespmf.kernels.vlad_geometry import KERNELS

__all__ = [
    "SIMPLEX_DATASETS",
    "SIMPLEX_DEFAULTS",
    "check_simplex_data",
    "check_simplex_spec",
    "load_simplex_data",
    "run_simplex",
]

#: The data sets a [simplex] spec can name and their kernel.
SIMPLEX_DATASETS = {"wikipedia": "multinomial", "sp500": "gaussian"}

#: Keys of [simplex] and their defaults (spec.py holds the types).
SIMPLEX_DEFAULTS = {
    "kernel": None,  # the data set's
    "n_components": 5,
    "methods": ["vlad", "gdm", "spa"],
    "n_splits": 3,
    "max_rows": 0,
    "max_words": 0,
    "nuts_rows": 0,
    "nuts_words": 200,
    "draws": 200,
    "tune": 200,
    "chains": 2,
    "top_words": 10,
    "random_state": None,
}


def check_simplex_spec(simplex: dict, name: str, seed: int) -> None:
    """Check the values of a ``[simplex]`` section (types are checked by the spec).

    Fills ``kernel`` and ``random_state`` from the data set and the spec's seed.

    Raises
    ------
    DataValidationError
        A data set without a simplex workflow, an unknown kernel or method, or a
        count out of range; the message names the key.

    Examples
    --------
    >>> s = dict(SIMPLEX_DEFAULTS)
    >>> check_simplex_spec(s, "sp500", 0); s["kernel"], s["random_state"]
    ('gaussian', 0)
    """
    if name not in SIMPLEX_DATASETS:
        raise DataValidationError(
            f"[simplex] needs a data set with a simplex-nest workflow: one of "
            f"{list(SIMPLEX_DATASETS)}; got data.name = {name!r}."
        )
    if simplex["kernel"] is None:
        simplex["kernel"] = SIMPLEX_DATASETS[name]
    if simplex["kernel"] not in KERNELS:
        raise DataValidationError(
            f"'simplex.kernel' must be one of {list(KERNELS)}; got {simplex['kernel']!r}."
        )
    if name == "wikipedia" and simplex["kernel"] != "multinomial":
        raise DataValidationError(
            "'simplex.kernel' must be 'multinomial' for a corpus of word counts; got "
            f"{simplex['kernel']!r}."
        )
    for m in simplex["methods"]:
        if m not in SIMPLEX_METHODS:
            raise DataValidationError(
                f"'simplex.methods' must list some of {list(SIMPLEX_METHODS)}; got {m!r}."
            )
    ks = simplex["n_components"]
    ks = ks if isinstance(ks, list) else [ks]
    if min(ks) < 2 or len(set(ks)) != len(ks):
        raise DataValidationError(
            f"'simplex.n_components' must be an integer >= 2 or a list of distinct ones; "
            f"got {simplex['n_components']!r}."
        )
    lows = {
        "n_splits": 2,
        "max_rows": 0,
        "max_words": 0,
        "nuts_rows": 0,
        "nuts_words": 2,
        "draws": 1,
        "tune": 0,
        "chains": 1,
        "top_words": 1,
    }
    for key, low in lows.items():
        if simplex[key] < low:
            raise DataValidationError(
                f"'simplex.{key}' must be >= {low}; got {simplex[key]!r}."
            )
    if simplex["random_state"] is None:
        simplex["random_state"] = seed
    check_random_state(simplex["random_state"])


def check_simplex_data(simplex: dict, name: str, options: dict) -> None:
    """Check every K of a checked ``[simplex]`` section against the data it will read.

    Raises
    ------
    DataValidationError
        A K the data cannot support (more vertices than features allow, or than rows).

    Examples
    --------
    >>> s = dict(SIMPLEX_DEFAULTS, n_components=[2, 30])
    >>> check_simplex_spec(s, "sp500", 0)
    >>> check_simplex_data(s, "sp500", {})
    Traceback (most recent call last):
    ...
    bayespmf._validation.DataValidationError: The 'n_components' parameter of [simplex] ...
    """
    X, _, _ = load_simplex_data(
        name, options, simplex["max_rows"], simplex["max_words"], simplex["random_state"]
    )
    ks = simplex["n_components"]
    for K in ks if isinstance(ks, list) else [ks]:
        check_nest_data(X, K, simplex["kernel"], "[simplex]")


def _top_columns(X, n: int) -> np.ndarray:
    """Indices of the ``n`` columns with the largest totals, in column order."""
    totals = np.asarray(X.sum(axis=0)).ravel()
    return np.sort(np.argsort(-totals, kind="stable")[:n])


def load_simplex_data(name: str, options: dict, max_rows: int, max_words: int, seed):
    """The data matrix of a [simplex] run: ``(X, features, ordered)``.

    ``X`` is a CSR matrix of counts (a corpus; rows left without words after
    ``max_words`` are dropped) or a dense array of percent returns; ``ordered`` says
    whether rows are in time order (then the held-out rows are the last ones).

    Examples
    --------
    >>> X, features, ordered = load_simplex_data("sp500", {"last_days": 50}, 0, 0, 0)
    >>> X.shape, features[:2], ordered
    ((50, 20), ['AAPL', 'AMD'], True)
    """
    from bayespmf import datasets

    rng = check_random_state(seed)
    if name == "sp500":
        R = datasets.load("sp500", **options)
        X = 100.0 * R.to_numpy()
        if 0 < max_rows < len(X):
            X = X[-max_rows:]
        return X, [str(c) for c in R.columns], True
    corpus = datasets.load(name, **options)
    X = sparse.csr_matrix(corpus.counts)
    vocab = list(corpus.vocabulary)
    if 0 < max_rows < X.shape[0]:
        X = X[np.sort(rng.choice(X.shape[0], max_rows, replace=False))]
    if 0 < max_words < X.shape[1]:
        cols = _top_columns(X, max_words)
        X, vocab = X[:, cols], [vocab[j] for j in cols]
    X = X[np.asarray(X.sum(axis=1)).ravel() > 0]
    return X, vocab, False


def _scores(kernel, vertices, train, test, seed) -> dict:
    from bayespmf.fit.simplex_metrics import simplex_frobenius_error, simplex_volume

    if kernel == "multinomial":
        from bayespmf.fit.topics import document_completion_perplexity, topic_coherence

        return {
            "perplexity": document_completion_perplexity(vertices, test, random_state=seed),
            "coherence_umass": float(np.mean(topic_coherence(vertices, train))),
        }
    Y, Yt = np.asarray(train), np.asarray(test)
    return {
        "frobenius_test": simplex_frobenius_error(Yt, vertices),
        "frobenius_train": simplex_frobenius_error(Y, vertices),
        "volume": simplex_volume(vertices)
        if vertices.shape[0] - 1 <= Y.shape[1]
        else np.nan,
    }


def run_simplex(spec, stage, metrics: dict, written: list, step, say) -> dict:
    """Carry out the ``[simplex]`` section of ``spec``; write into ``stage``.

    ``step`` and ``say`` are the run's step announcer and printer
    (:mod:`bayespmf.apps.run`); the outputs' names are appended to ``written`` and
    what was measured to ``metrics["simplex"]``.

    Returns
    -------
    dict
        ``n_components``, ``methods`` (DataFrame), ``fits`` (method -> SimplexNestFit),
        ``idata`` (when NUTS ran), ``k_table`` (when K was chosen).
    """
    import matplotlib.pyplot as plt

    from bayespmf.fit import fit_simplex_nest
    from bayespmf.fit.simplex_selection import select_simplex_n_components

    s = spec.simplex
    name, kernel, seed = spec.data["name"], s["kernel"], s["random_state"]
    rng = check_random_state(seed)
    res: dict = {"kernel": kernel}
    out: dict = {}
    with step(f"loading {name} for a {kernel} simplex nest"):
        X, features, ordered = load_simplex_data(
            name, spec.data["options"], s["max_rows"], s["max_words"], rng
        )
        n = X.shape[0]
        n_test = max(1, round(spec.data["test_fraction"] * n))
        order = np.arange(n) if ordered else rng.permutation(n)
        train_idx, test_idx = np.sort(order[: n - n_test]), np.sort(order[n - n_test :])
        train, test = X[train_idx], X[test_idx]
        say(f"   {n} rows x {X.shape[1]} features; train {len(train_idx)}, test {n_test}")
        res.update(n_rows=n, n_features=X.shape[1], n_train=len(train_idx), n_test=n_test)
    K = s["n_components"]
    if isinstance(K, list):
        with step(f"choosing K among {K} by held-out completion (VLAD)"):
            table, K = select_simplex_n_components(
                train, K, "vlad", kernel=kernel, n_splits=s["n_splits"], random_state=seed
            )
            say(table.to_string(float_format=lambda v: f"{v:.5g}"))
        table.to_csv(stage / "k_selection.csv")
        written.append("k_selection.csv")
        res["k_selection"] = table.reset_index().to_dict(orient="records")
        out["k_table"] = table
        if spec.output["figures"]:
            from bayespmf.plots.simplex_n_components import plot_simplex_n_components

            fig = plot_simplex_n_components(table)
            fig.savefig(stage / "n_components.png", dpi=100)
            plt.close(fig)
            written.append("n_components.png")
    res["n_components"] = out["n_components"] = int(K)
    rows, fits = [], {}
    with step(f"fitting {', '.join(s['methods'])} with K = {K}"):
        for method in s["methods"]:
            t0 = time.perf_counter()
            fit, caught = call_recording_warnings(
                fit_simplex_nest,
                train,
                K,
                method,
                kernel=kernel,
                random_state=None if method == "spa" else seed,
            )
            seconds = time.perf_counter() - t0
            fits[method] = fit
            alpha = fit.details.get("alpha")
            row = {
                "method": SIMPLEX_METHODS[method],
                "seconds": seconds,
                "alpha": np.nan if alpha is None else float(np.mean(alpha)),
                **_scores(kernel, fit.vertices, train, test, seed),
                "warnings": len(caught),
            }
            rows.append(row)
            for w in caught:
                say(f"   {row['method']} warned: {str(w.message)[:200]}")
    table = pd.DataFrame(rows).set_index("method")
    say(table.to_string(float_format=lambda v: f"{v:.4g}"))
    table.to_csv(stage / "methods.csv")
    np.savez(stage / "vertices.npz", **{m: f.vertices for m, f in fits.items()})
    written += ["methods.csv", "vertices.npz"]
    res["methods"] = table.reset_index().to_dict(orient="records")
    out["methods"], out["fits"] = table, fits
    if kernel == "multinomial":
        from bayespmf.fit.topics import top_words

        lines = []
        for m, f in fits.items():
            lines.append(f"== {SIMPLEX_METHODS[m]}")
            for k, words in enumerate(top_words(f.vertices, features, s["top_words"])):
                lines.append(f"topic {k}: {' '.join(words)}")
        (stage / "topics.txt").write_text("\n".join(lines) + "\n")
        written.append("topics.txt")
    if s["nuts_rows"] > 0:
        out["idata"], post = _nuts(s, train, features, kernel, K, fits, step, say, res)
        post.to_csv(stage / "posterior_vertices.csv", index=False)
        written.append("posterior_vertices.csv")
    metrics["simplex"] = res
    return out


def _nuts(s, train, features, kernel, K, fits, step, say, res):
    """NUTS on a subset of the training rows, started from VLAD; posterior table."""
    from bayespmf.estimators import VLAD
    from bayespmf.models import sample, simplex_nest_model

    sub = train[: s["nuts_rows"]]
    names = list(features)
    if kernel == "multinomial" and s["nuts_words"] < sub.shape[1]:
        cols = _top_columns(sub, s["nuts_words"])
        sub, names = sub[:, cols], [names[j] for j in cols]
        sub = sub[np.asarray(sub.sum(axis=1)).ravel() > 0]
    if sparse.issparse(sub):
        sub = sub.toarray()
    seed = s["random_state"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VLAD's warnings were reported for the full fit
        start = VLAD(K, kernel, random_state=seed).fit(sub)
    alpha = start.alpha_  # a vector after VLAD's asymmetric fallback (start's order)
    label = f"{s['chains']} chain(s) x ({s['tune']} tune + {s['draws']} draws)"
    with step(f"NUTS on {sub.shape[0]} rows x {sub.shape[1]} features: {label}"):
        model = simplex_nest_model(sub, K, kernel, alpha=alpha)
        idata = sample(
            model,
            init=start,
            draws=s["draws"],
            tune=s["tune"],
            chains=s["chains"],
            cores=1,
            random_seed=seed,
            progressbar=False,
        )
    V = idata.posterior["vertices"]
    mean = V.mean(("chain", "draw")).to_numpy()
    sd = V.std(("chain", "draw")).to_numpy()
    res["nuts"] = {
        "rows": int(sub.shape[0]),
        "features": int(sub.shape[1]),
        "alpha_fixed": np.round(alpha, 6).tolist(),
        "sampling_seconds": round(float(idata.posterior.attrs["sampling_time"]), 2),
        "mean_posterior_sd": float(sd.mean()),
    }
    if kernel == "multinomial":
        top = np.argsort(-mean, axis=1)[:, : s["top_words"]]
        post = pd.DataFrame(
            [
                {"vertex": k, "feature": names[j], "mean": mean[k, j], "sd": sd[k, j]}
                for k in range(K)
                for j in top[k]
            ]
        )
        for k in range(K):
            part = post[post.vertex == k]
            say(
                f"   topic {k}: "
                + ", ".join(
                    f"{w} {m:.3f}+-{d:.3f}"
                    for w, m, d in zip(part.feature, part["mean"], part.sd, strict=True)
                )
            )
    else:
        kk, jj = np.meshgrid(np.arange(K), np.arange(len(names)), indexing="ij")
        post = pd.DataFrame(
            {
                "vertex": kk.ravel(),
                "feature": [names[j] for j in jj.ravel()],
                "mean": mean.ravel(),
                "sd": sd.ravel(),
            }
        )
        say(f"   posterior sd of the vertices: mean {sd.mean():.4f}, max {sd.max():.4f}")
    say(f"   sampling {res['nuts']['sampling_seconds']} s")
    return idata, post
