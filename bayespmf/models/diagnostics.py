"""Convergence of a posterior in words: r-hat, ESS, divergences and chains in modes."""

from __future__ import annotations

import arviz as az
import numpy as np
import pandas as pd

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
