"""Convergence of a posterior in words: r-hat, ESS, divergences and chains in modes."""

from __future__ import annotations

import arviz as az
import numpy as np
import pandas as pd
from scipy import fft, special

__all__ = ["MODE_GAP_SDS", "convergence_summary"]

#: ``convergence_summary`` reports chains in different modes when their mean total
#: log-likelihoods differ by more than this many pooled within-chain sds.
MODE_GAP_SDS = 3.0


def convergence_summary(idata, *, rhat_max: float = 1.01, ess_min: float = 400) -> dict:
    """r-hat, bulk/tail ESS and divergences per variable, with problems named in words.

    Returns
    -------
    dict
        ``table`` (pandas.DataFrame, one row per variable: worst r-hat, smallest bulk and
        tail ESS), ``divergences`` (int), ``problems`` (list of str; empty if none)
        and ``ok`` (bool).
    """
    post = idata["posterior"].to_dataset()
    rows = []
    for var in post.data_vars:  # per variable: different dims (STACK-NOTES.md)
        one = post[[var]]
        rows.append(
            {
                "variable": var,
                "r_hat_max": float(az.rhat(one)[var].max()),
                "ess_bulk_min": float(az.ess(one, method="bulk")[var].min()),
                "ess_tail_min": float(az.ess(one, method="tail")[var].min()),
            }
        )
    table = pd.DataFrame(rows).set_index("variable")
    div = 0
    if "sample_stats" in idata.children and "diverging" in idata.sample_stats:
        div = int(idata.sample_stats["diverging"].values.sum())
    problems = []
    levels = _chain_levels(idata)
    if post.sizes.get("chain", 1) > 1:
        bad = table.index[table["r_hat_max"] > rhat_max].tolist()
        if bad and levels is not None and len(levels[0]) == 1:
            _, means, pooled = levels
            problems.append(
                f"r-hat above {rhat_max} for {bad}: chains disagree, but their mean "
                f"total log-likelihoods agree (largest gap {np.ptp(means):.3g}, "
                f"within-chain sd {pooled:.3g}), so they explore the same region of "
                "the posterior slowly (or label switching was not undone): draw more "
                "(longer tune and draws)."
            )
        elif bad:
            where = "" if levels is not None else _chains_apart(post, table)
            problems.append(
                f"r-hat above {rhat_max} for {bad}: chains disagree (label switching "
                f"not undone, several modes, or too few draws).{where}"
            )
    modes = _chain_modes(idata, levels)
    if modes is not None:
        problems.append(modes)
    low = table.index[table["ess_bulk_min"] < ess_min].tolist()
    if low:
        problems.append(
            f"bulk ESS below {ess_min:g} for {low}: draw more or reparametrize."
        )
    if div:
        problems.append(
            f"{div} divergent transitions: raise target_accept (e.g. 0.95) or check the "
            "priors."
        )
    return {"table": table, "divergences": div, "problems": problems, "ok": not problems}


def rhat_ess_bulk(draws) -> tuple[np.ndarray, np.ndarray]:
    """Rank-normalized split r-hat and bulk ESS of every entry at once: ArviZ's numbers.

    The same quantities as ``az.rhat`` (``method="rank"``: the larger of the bulk and
    the folded split r-hat of the rank-normalized draws) and ``az.ess(method="bulk")``
    (Geyer's initial monotone sequence on the rank-normalized split chains), which
    :func:`convergence_summary` reports, to rounding. ArviZ computes them entry by
    entry, and the ESS lag by lag, in Python; here every entry and lag is one array
    operation, so that :func:`bayespmf.models.sample` can check a target
    (``target_ess``) between batches of draws at a small cost beside a batch.

    Parameters
    ----------
    draws : array_like, shape (chain, draw, entry)

    Returns
    -------
    rhat, ess : ndarray, shape (entry,)
        NaN where ArviZ gives NaN: an entry with a NaN draw, fewer than 4 draws, and
        (r-hat only) fewer than 2 chains or constant draws.

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(2, 100, 3))
    >>> rhat, ess = rhat_ess_bulk(x)
    >>> bool(np.allclose(ess, [float(az.ess(x[:, :, i], method="bulk")) for i in range(3)]))
    True
    >>> bool(np.allclose(rhat, [float(az.rhat(x[:, :, i])) for i in range(3)]))
    True
    """
    x = np.asarray(draws, dtype=float)
    if x.ndim != 3:
        raise ValueError(f"'draws' must have shape (chain, draw, entry); got {x.shape}.")
    n_chain, n_draw, n_entry = x.shape
    rhat = np.full(n_entry, np.nan)
    ess = np.full(n_entry, np.nan)
    if n_draw < 4 or n_entry == 0:
        return rhat, ess
    # a block of entries at a time: its arrays stay small (in cache), whatever the draws
    step = max(1, RANK_BLOCK // (n_chain * n_draw))
    for first in range(0, n_entry, step):
        part = slice(first, first + step)
        block = np.moveaxis(x[:, :, part], 2, 0)  # (entry, chain, draw)
        valid = ~np.isnan(block).any(axis=(1, 2))
        if valid.any():
            r, e = _rhat_ess_block(block[valid], n_chain)
            rhat[part][valid], ess[part][valid] = r, e
    return rhat, ess


#: Draws (chains x draws x entries) that :func:`rhat_ess_bulk` ranks at once.
RANK_BLOCK = 2**20


def _rhat_ess_block(block: np.ndarray, n_chain: int):
    """r-hat and bulk ESS of a block of entries (``block``: entry, chain, draw)."""
    n_draw = block.shape[2]
    half = n_draw // 2
    # the split chains: (entry, 2 * chain, half)
    split = np.concatenate([block[:, :, :half], block[:, :, n_draw - half :]], axis=1)
    z = _z_scale(split)
    rhat = np.full(split.shape[0], np.nan)
    if n_chain >= 2:
        folded = np.abs(split - np.median(split, axis=(1, 2), keepdims=True))
        with np.errstate(divide="ignore", invalid="ignore"):
            bulk, tail = _split_rhat(z), _split_rhat(_z_scale(folded))
        # Python's max(bulk, tail), as ArviZ takes it (NaN as it falls)
        rhat = np.where(tail > bulk, tail, bulk)
    return rhat, _geyer_ess(z)


def _z_scale(a: np.ndarray) -> np.ndarray:
    """Rank-normalize each entry's draws (``a``: entry, chain, draw), ties averaged."""
    n_entry, n_chain, n_draw = a.shape
    size = n_chain * n_draw
    flat = a.reshape(n_entry, size)
    order = np.argsort(flat, axis=1)
    ordered = np.take_along_axis(flat, order, axis=1)
    # twice the (1-based) rank of each sorted position; ties (rare) get the mean of
    # their positions, as scipy's rankdata "average"
    twice = np.broadcast_to(np.arange(2, 2 * size + 1, 2), flat.shape).copy()
    row, pos = np.nonzero(ordered[:, 1:] == ordered[:, :-1])  # pos ties pos + 1
    if row.size:
        flat_pos = row * size + pos
        starts = np.r_[True, flat_pos[1:] != flat_pos[:-1] + 1]  # a run of ties begins
        ends = np.r_[starts[1:], True]
        lo, hi = pos[starts], pos[ends] + 1  # each run covers positions lo..hi
        length = hi - lo + 1
        offset = np.arange(length.sum()) - np.repeat(np.cumsum(length) - length, length)
        twice[np.repeat(row[starts], length), np.repeat(lo, length) + offset] = np.repeat(
            lo + hi + 2, length
        )
    # twice the rank is an integer: the normal quantiles of every rank looked up
    quantile = special.ndtri((np.arange(1, 2 * size + 1) / 2 - 3 / 8) / (size + 1 / 4))
    z = np.empty_like(flat)
    np.put_along_axis(z, order, quantile[twice - 1], axis=1)
    return z.reshape(a.shape)


def _split_rhat(z: np.ndarray) -> np.ndarray:
    """Gelman-Rubin r-hat of each entry (``z``: entry, chain, draw)."""
    n = z.shape[2]
    between = n * np.var(z.mean(axis=2), axis=1, ddof=1)
    within = np.var(z, axis=2, ddof=1).mean(axis=1)
    return np.sqrt((between / within + n - 1) / n)


def _geyer_ess(z: np.ndarray) -> np.ndarray:
    """ESS of each entry (``z``: entry, chain, draw): ArviZ's ``_ess``, every lag at once.

    The autocorrelations of the chains (by FFT), Geyer's initial positive sequence
    (pairs of lags summed until a pair's sum is not positive) and its monotone
    version (each pair's sum at most the one before: a running minimum).
    """
    n_entry, n_chain, n = z.shape
    const = (z.max(axis=(1, 2)) - z.min(axis=(1, 2))) < np.finfo(float).resolution
    centered = z - z.mean(axis=2, keepdims=True)
    m = fft.next_fast_len(2 * n, real=True)
    spec = fft.rfft(centered, n=m, axis=2)
    acov = fft.irfft(spec * np.conjugate(spec), n=m, axis=2)[:, :, :n] / n
    mean_acov = acov.mean(axis=1)  # (entry, lag)
    mean_var = mean_acov[:, 0] * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if n_chain > 1:
        var_plus = var_plus + np.var(z.mean(axis=2), axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var[:, None] - mean_acov) / var_plus[:, None]
    rho[:, 0] = 1.0
    # pair k >= 1 sums the lags 2k and 2k + 1; ArviZ's loop reaches pair k while
    # 2k - 1 < n - 3 and every pair before has a positive sum
    n_pairs = len(range(1, n - 3, 2))
    pairs = np.concatenate(
        [
            rho[:, :2].sum(axis=1, keepdims=True),
            rho[:, 2 : 2 + 2 * n_pairs].reshape(n_entry, n_pairs, 2).sum(axis=2),
        ],
        axis=1,
    )  # (entry, 1 + n_pairs): pair 0 is lags 0 and 1
    tau = np.zeros(n_entry)  # the loop does not run: tau 0 (then its floor below)
    ran = (pairs[:, 0] > 0) & (n_pairs > 0)
    if ran.any():
        p = pairs[ran]
        stop = p[:, 1:] <= 0
        # the last pair the loop computes: the first not positive, else the last one
        end = np.where(stop.any(axis=1), stop.argmax(axis=1) + 1, n_pairs)
        rows = np.arange(p.shape[0])
        even = rho[ran][rows, 2 * end]
        kept = p[rows, end] >= 0  # a pair whose sum is 0 is still stored
        extra = np.where(kept | (even > 0), even, 0.0)
        monotone = np.cumsum(np.minimum.accumulate(p, axis=1), axis=1)
        tau[ran] = -1.0 + 2.0 * monotone[rows, end - 1] + extra
    total = n_chain * n
    tau = np.maximum(tau, 1 / np.log10(total))
    out = total / tau
    out[np.isnan(rho).any(axis=1)] = np.nan
    out[const] = total
    return out


def _chain_levels(idata):
    """``(groups, means, pooled_sd)`` of the chains' total log-likelihood, or None.

    Chains are grouped by their mean total log-likelihood: a gap of more than
    ``MODE_GAP_SDS`` pooled within-chain sds starts a new group (a mode).
    """
    if "log_likelihood" not in idata.children or idata.posterior.sizes.get("chain", 1) < 2:
        return None
    group = idata["log_likelihood"].to_dataset()
    ll = sum(  # (chain, draw): the total over every observed variable and entry
        v.sum([d for d in v.dims if d not in ("chain", "draw")]).values
        for v in group.data_vars.values()
    )
    return _gap_groups(ll)


def _gap_groups(x):
    """``(groups, means, pooled_sd)`` of the chains of ``x`` (chain, draw).

    Chains sorted by their means; a gap of more than ``MODE_GAP_SDS`` pooled
    within-chain sds starts a new group.
    """
    means, sds = x.mean(axis=1), x.std(axis=1)
    pooled = float(np.sqrt(np.mean(sds**2)))
    order = np.argsort(-means)
    groups = [[int(order[0])]]
    for c in order[1:]:
        if means[groups[-1][-1]] - means[c] > MODE_GAP_SDS * max(pooled, 1e-12):
            groups.append([int(c)])
        else:
            groups[-1].append(int(c))
    return groups, means, pooled


def _chain_modes(idata, levels=None) -> str | None:
    """In words: which chains sit in which mode, by their total log-likelihood."""
    levels = _chain_levels(idata) if levels is None else levels
    if levels is None or len(levels[0]) == 1:
        return None
    groups, means, pooled = levels
    parts = [f"chains {sorted(g)} around {means[g].mean():.6g}" for g in groups]
    gap = float(means[groups[0]].mean() - means[groups[-1]].mean())
    started = idata.posterior.attrs.get("chain_start_optimum")
    origin = (
        f" The chains started at optima {list(started)} of the multi-start fit."
        if started is not None
        else ""
    )
    return (
        f"chains sit in {len(groups)} different modes of the posterior (mean total "
        f"log-likelihood: {'; '.join(parts)}; gap {gap:.3g}, within-chain sd "
        f"{pooled:.3g}).{origin} The posterior is multimodal: report the modes "
        "separately (select chains) or sample longer; averages over all chains mix "
        "them."
    )


def _chains_apart(post, table) -> str:
    """Which chains disagree, in words, from the draws alone (no log-likelihood group).

    The entry with the worst r-hat: its chains grouped by their means (a gap of more
    than ``MODE_GAP_SDS`` pooled within-chain sds starts a new group).
    """
    var = str(table["r_hat_max"].idxmax())
    draws = post[var]
    rhat = az.rhat(post[[var]])[var]
    flat = int(np.nanargmax(np.asarray(rhat.values, dtype=float).ravel()))
    index = np.unravel_index(flat, rhat.shape) if rhat.ndim else ()
    entry = draws.isel(dict(zip(rhat.dims, index, strict=True))).values  # (chain, draw)
    groups, means, pooled = _gap_groups(entry)
    label = var + (str(list(map(int, index))) if index else "")
    if len(groups) == 1:
        return (
            f" On {label} (worst r-hat) the chains' means are within "
            f"{MODE_GAP_SDS:g} within-chain sds ({pooled:.3g}) of each other: they "
            "drift slowly rather than sit apart; draw more."
        )
    parts = [f"chains {sorted(g)} around {means[g].mean():.4g}" for g in groups]
    started = post.attrs.get("chain_start_optimum")
    origin = (
        f" The chains started at optima {list(started)} of the multi-start fit."
        if started is not None
        else ""
    )
    return (
        f" On {label} (worst r-hat): {'; '.join(parts)} (within-chain sd "
        f"{pooled:.3g}).{origin} Without a log_likelihood group (sample(..., "
        "log_likelihood=True)) modes cannot be told from slow mixing by their fit."
    )
