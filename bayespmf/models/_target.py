"""Sampling to a target instead of a length: ``sample(..., target_ess=...)``.

:func:`sample_to_target` runs the chains in batches: the first of ``draws`` (after
``tune``), then further ones, each continuing every chain from its last draw with no
tuning, until the worst r-hat and the smallest bulk ESS of the finished (aligned)
draws reach their targets or the time runs out. It is exact for the conjugate Gibbs
step (:class:`~bayespmf.models.gibbs.LatentClassGibbs`,
:class:`~bayespmf.models.gibbs_distal.OutcomeGibbs` without covariates): the step has
no adaptation and no state besides the point, so a chain restarted at its last draw
with a fresh random stream is the same Markov chain. :func:`check_sample_target`
refuses what cannot be continued that way (NUTS, ADVI, the Gibbs steps that carry a
NUTS step for the coefficients) before any work.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable

import numpy as np
import xarray as xr

from bayespmf._validation import ConvergenceWarning, DataValidationError, check_float
from bayespmf.models.diagnostics import rhat_ess_bulk

__all__ = [
    "DEFAULT_MAX_TIME",
    "DEFAULT_TARGET_ESS",
    "DEFAULT_TARGET_RHAT",
    "ESS_MARGIN",
    "RHAT_MARGIN",
    "TARGET_FIRST_DRAWS",
    "TARGET_TUNE",
    "TargetSpec",
    "check_sample_target",
    "entry_stats",
    "sample_to_target",
    "target_stats",
]

#: ``target_rhat`` when only ``target_ess`` is given (the usual threshold).
DEFAULT_TARGET_RHAT = 1.01

#: ``target_ess`` of ``sample(..., method="gibbs")`` when neither ``draws`` nor
#: ``target_ess`` is given: the bulk ESS usually asked of every entry (Vehtari et al.
#: 2021 suggest at least 100 per chain; 400 is that for 4 chains).
DEFAULT_TARGET_ESS = 400.0

#: ``max_time`` (seconds, the point estimate included) of that default target: the
#: longest a default call runs before it returns what it has, with a warning.
DEFAULT_MAX_TIME = 600.0

#: Sampling to a target without ``draws`` / ``tune`` given: the first batch's draws
#: and its burn-in (per chain; each draw is ``n_sweeps`` Gibbs sweeps). Small, so
#: that a first batch on large data leaves time for the further ones (which grow to
#: as many draws as so far: the burn-in becomes a shrinking share).
TARGET_FIRST_DRAWS = 200
TARGET_TUNE = 200

#: A batch sized from the ESS so far asks for this much more ESS than the target, so
#: that the noise of the ESS estimate rarely leaves it just short.
ESS_MARGIN = 1.1

#: A batch sized from the r-hat so far asks for this much more than the draws that
#: would bring the r-hat's excess over 1 to the target's: the r-hat of the worst of
#: many entries is noisy.
RHAT_MARGIN = 1.25

#: The shortest further batch, as a share of the draws so far: shorter ones move the
#: ESS too little to pay for the sampler's start.
MIN_BATCH_SHARE = 0.125

#: Where the caller may thin the further batches (``thin``; the Gibbs step without a
#: user's ``n_sweeps``), the draws so far are kept about this many per
#: autocorrelation time of the slowest entry (its draws per unit of ESS): closer
#: draws add little ESS but their memory and the checks' time.
DRAWS_PER_TAU = 4

#: ... and at most this factor of thinning.
MAX_THIN = 16

#: A check between batches computes the r-hat and ESS of the entries within this
#: factor of the target (:func:`_watch`); every entry is computed where they meet it.
WATCH_MARGIN = 2.0

#: ... and at least this many entries, those of smallest ESS.
WATCH_MIN = 16

_NUTS_WHY = (
    "PyMC 6 cannot continue a NUTS chain: pm.sample resets a NUTS step's step size and "
    "mass matrix to their initial values at the start of every chain, and adapts them "
    "inside the chain processes, which do not return them; nutpie, numpyro and "
    "blackjax start a new adaptation on every call"
)


class TargetSpec:
    """A checked target: ``ess``, ``rhat`` and ``max_time`` (seconds or None)."""

    __slots__ = ("ess", "max_time", "rhat")

    def __init__(self, ess: float, rhat: float, max_time: float | None):
        self.ess, self.rhat, self.max_time = ess, rhat, max_time


def check_sample_target(
    target_ess,
    target_rhat,
    max_time,
    *,
    owner: str,
    method: str,
    family_name: str,
    chains: int,
    sample_kwargs: dict,
) -> TargetSpec | None:
    """Check the target arguments of ``sample``; None when no target is asked for.

    ``target_rhat`` and ``max_time`` apply with ``target_ess`` only (refused, never
    ignored, without it). Refused with a target: a method other than Gibbs, a
    latent-class regression (its Gibbs step carries a NUTS step of the coefficients),
    fewer than 2 chains (no r-hat) and ``var_names`` (every free variable must be
    drawn to continue the chains).

    Raises
    ------
    ValueError
        A value out of range (``target_ess`` <= 0, ``target_rhat`` <= 1,
        ``max_time`` <= 0), or a target where it cannot be reached exactly (the
        message says why and what to use).

    Examples
    --------
    >>> spec = check_sample_target(
    ...     400, None, 60, owner="sample", method="gibbs", family_name="latent_class",
    ...     chains=2, sample_kwargs={},
    ... )
    >>> spec.ess, spec.rhat, spec.max_time
    (400.0, 1.01, 60.0)
    >>> check_sample_target(
    ...     400, None, None, owner="sample", method="nuts", family_name="latent_class",
    ...     chains=2, sample_kwargs={},
    ... )
    Traceback (most recent call last):
    ...
    bayespmf._validation.DataValidationError: 'target_ess' is not available with ...
    """
    if target_ess is None:
        for name, value in (("target_rhat", target_rhat), ("max_time", max_time)):
            if value is not None:
                raise DataValidationError(
                    f"The '{name}' parameter of {owner} applies with 'target_ess' only "
                    f"(sampling to a target); got {name}={value!r} without it. Pass "
                    "target_ess as well, or drop it."
                )
        return None
    ess = _above(target_ess, "target_ess", 0.0, owner, "a bulk ESS, e.g. 400")
    rhat = DEFAULT_TARGET_RHAT if target_rhat is None else target_rhat
    rhat = _above(rhat, "target_rhat", 1.0, owner, "an r-hat, e.g. 1.01")
    if max_time is not None:
        max_time = _above(max_time, "max_time", 0.0, owner, "seconds, e.g. 600")
    if method == "nuts":
        raise DataValidationError(
            f"'target_ess' is not available with method='nuts' in {owner}: the further "
            f"batches continue every chain from its last draw with no new tuning, and "
            f"{_NUTS_WHY}. Use method='gibbs' (latent-class models, without "
            "covariates), or set 'draws' (and 'tune') for NUTS."
        )
    if method == "advi":
        raise DataValidationError(
            f"'target_ess' is not available with method='advi' in {owner}: ADVI draws "
            "independent samples from a fitted approximation, it has no chains to "
            "continue, and its r-hat and ESS do not measure its error. Use "
            "method='gibbs', or set 'draws'."
        )
    if family_name != "latent_class":
        raise DataValidationError(
            f"'target_ess' is not available for a {family_name} model in {owner}: "
            "method='gibbs' draws its coefficients by a NUTS step tuned during 'tune', "
            f"and {_NUTS_WHY}. It samples to a target latent-class models without "
            "covariates (their Gibbs step has no adaptation); set 'draws' here."
        )
    if chains < 2:
        raise DataValidationError(
            f"'target_ess' needs at least 2 chains in {owner} (r-hat compares chains); "
            f"got chains={chains}."
        )
    if sample_kwargs.get("var_names") is not None:
        raise DataValidationError(
            f"'target_ess' continues every chain from its last draw of every free "
            f"variable, so {owner} cannot take 'var_names' with it; drop 'var_names'."
        )
    return TargetSpec(ess, rhat, max_time)


def _above(value, name: str, low: float, owner: str, what: str) -> float:
    """``value`` as a float, finite and above ``low``, or a ValueError naming it."""
    try:
        return check_float(value, name, owner=owner, low=low, low_open=True)
    except ValueError:
        raise DataValidationError(
            f"The '{name}' parameter of {owner} must be a finite number above {low:g} "
            f"({what}); got {value!r}."
        ) from None


def entry_stats(idata, watch=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(entries, r-hat, bulk ESS)`` of a posterior's entries, one value per entry.

    ``idata`` is a DataTree (its ``posterior`` group) or a posterior Dataset; its
    entries are numbered through its variables in order, each flattened. ``watch``
    (entry numbers, ascending) computes those only. Entries whose draws are all
    equal (the weight of a one-class model) carry no uncertainty and are left out of
    ``entries``. The values are those of
    :func:`~bayespmf.models.convergence_summary` (see
    :func:`~bayespmf.models.diagnostics.rhat_ess_bulk`); NaN where too few draws.

    Examples
    --------
    >>> import arviz as az
    >>> x = np.random.default_rng(0).normal(size=(2, 200, 3))
    >>> idata = az.from_dict({"posterior": {"w": x, "c": np.ones((2, 200))}})
    >>> entries, rhat, ess = entry_stats(idata)
    >>> entries.tolist(), bool(rhat.max() < 1.05 and ess.min() > 200)
    ([0, 1, 2], True)
    >>> entry_stats(idata, watch=np.array([1]))[0].tolist()
    [1]
    """
    post = idata if isinstance(idata, xr.Dataset) else idata["posterior"].to_dataset()
    chains, draws = post.sizes["chain"], post.sizes["draw"]
    blocks = [
        post[v].transpose("chain", "draw", ...).values.reshape(chains, draws, -1)
        for v in post.data_vars
    ]
    offsets = np.cumsum([0] + [b.shape[2] for b in blocks])
    index = np.arange(offsets[-1]) if watch is None else np.asarray(watch, dtype=int)
    owner = np.searchsorted(offsets, index, side="right") - 1
    parts = [blocks[k][:, :, index[owner == k] - offsets[k]] for k in np.unique(owner)]
    x = np.concatenate(parts, axis=2) if parts else np.zeros((chains, draws, 0))
    moving = np.ptp(x, axis=(0, 1)) >= np.finfo(float).resolution
    rhat, ess = rhat_ess_bulk(x[:, :, moving])
    return index[moving], rhat, ess


def target_stats(idata) -> tuple[float, float]:
    """``(worst r-hat, smallest bulk ESS)`` over every entry of a posterior.

    ``idata`` is a DataTree (its ``posterior`` group) or a posterior Dataset. The
    ``r_hat_max`` and ``ess_bulk_min`` of
    :func:`~bayespmf.models.convergence_summary`'s table, worst over its variables,
    computed at once (:func:`entry_stats`; constant entries left out). NaN where an
    entry has too few draws.

    Examples
    --------
    >>> import arviz as az
    >>> x = np.random.default_rng(0).normal(size=(2, 200, 3))
    >>> idata = az.from_dict({"posterior": {"w": x, "c": np.ones((2, 200))}})
    >>> r, e = target_stats(idata)
    >>> bool(r < 1.05 and e > 200)
    True
    """
    return _worst(*entry_stats(idata)[1:])


def _worst(rhat: np.ndarray, ess: np.ndarray) -> tuple[float, float]:
    """The worst r-hat and smallest ESS (NaN if any is); ``(1, inf)`` of no entry."""
    if not rhat.size:
        return 1.0, math.inf
    return float(np.max(rhat)), float(np.min(ess))


def _watch(entries, rhat, ess, spec) -> np.ndarray:
    """The entries a check between batches computes: those near or short of the target.

    An entry with an ESS below :data:`WATCH_MARGIN` times the target, or an r-hat
    above ``1 + (target_rhat - 1) / WATCH_MARGIN`` (or NaN), and at least the
    :data:`WATCH_MIN` of smallest ESS; the others were past the target with a margin.
    """
    with np.errstate(invalid="ignore"):
        near = ~(ess >= WATCH_MARGIN * spec.ess) | ~(
            rhat <= 1 + (spec.rhat - 1) / WATCH_MARGIN
        )
    worst = np.argsort(np.where(np.isnan(ess), -np.inf, ess))[:WATCH_MIN]
    near[worst] = True
    return entries[near]


def batch_seed(entropy, batch: int) -> int:
    """The seed of further batch ``batch`` (>= 1) from the run's ``entropy``.

    Examples
    --------
    >>> batch_seed(0, 1) == batch_seed(0, 1) != batch_seed(1, 1)
    True
    """
    seq = np.random.SeedSequence(entropy, spawn_key=(int(batch),))
    return int(seq.generate_state(1, np.uint32)[0])


def _entropy(random_seed):
    """The entropy the further batches' seeds derive from (fresh where None).

    An int or a sequence of ints as given; a Generator gives one draw (so a
    generator in the same state gives the same run).
    """
    if isinstance(random_seed, np.random.Generator):
        return int(random_seed.integers(2**63))
    if random_seed is None:
        return np.random.SeedSequence().entropy
    return random_seed


def _join(raw, new):
    """``raw`` with ``new``'s draws appended along ``draw`` in every drawn group."""
    out = raw.copy()
    for name, node in new.children.items():
        ds = node.to_dataset()
        if "draw" not in ds.dims or name not in raw.children:
            continue
        joined = xr.concat(
            [raw[name].to_dataset(), ds], dim="draw", combine_attrs="override"
        )
        out[name] = joined.assign_coords(draw=np.arange(joined.sizes["draw"]))
    return out


def _last_draws(raw, names: list[str]) -> list[dict]:
    """Every chain's last draw of ``names`` (constrained values): its next start."""
    post = raw["posterior"].to_dataset()
    return [
        {name: np.array(post[name].values[c, -1]) for name in names}
        for c in range(post.sizes["chain"])
    ]


def thin_factor(draws: int, chains: int, ess: float) -> int:
    """How much to thin draws whose slowest entry has bulk ESS ``ess``.

    The slowest entry's autocorrelation time in draws is ``tau = chains * draws /
    ess``; keeping one draw in ``tau / DRAWS_PER_TAU`` loses little of its ESS
    (for an AR(1) chain of ``tau`` 16, thinned by 4: about 2 %). At least 1, at most
    :data:`MAX_THIN`; 1 where the ESS is not finite.

    Examples
    --------
    >>> thin_factor(200, 4, 50.0), thin_factor(200, 4, 800.0), thin_factor(200, 4, 1.0)
    (4, 1, 16)
    """
    if not (math.isfinite(ess) and ess > 0):
        return 1
    tau = chains * draws / ess
    return int(min(MAX_THIN, max(1, tau // DRAWS_PER_TAU)))


def _thin_draws(ds, k: int):
    """Every ``k``-th draw of a Dataset, the last one kept, renumbered."""
    kept = ds.isel(draw=slice((ds.sizes["draw"] - 1) % k, None, k))
    return kept.assign_coords(draw=np.arange(kept.sizes["draw"]))


def _thin(tree, k: int):
    """:func:`_thin_draws` of every group of a DataTree that has draws."""
    out = tree.copy()
    for name, node in tree.children.items():
        ds = node.to_dataset()
        if "draw" in ds.dims:
            out[name] = _thin_draws(ds, k)
    return out


def _append(aligned, more):
    """Two posterior Datasets joined along ``draw`` (renumbered), ``aligned``'s attrs."""
    joined = xr.concat([aligned, more], dim="draw", combine_attrs="override")
    return joined.assign_coords(draw=np.arange(joined.sizes["draw"]))


def _next_length(total: int, rhat: float, ess: float, spec) -> int:
    """Draws of the next batch: what the r-hat and ESS so far need, at most as many.

    For chains in their stationary law the bulk ESS grows, and the r-hat's excess
    over 1 shrinks, in proportion to the draws (Vehtari et al. 2021): the draws that
    would bring each to its target from its value so far (with :data:`ESS_MARGIN`
    and :data:`RHAT_MARGIN`), the larger of the two, at least
    :data:`MIN_BATCH_SHARE` of the draws so far. Where the r-hat is not finite the
    batch is as long as the draws so far.
    """
    floor = max(1, math.ceil(MIN_BATCH_SHARE * total))
    if not (math.isfinite(rhat) and math.isfinite(ess) and ess > 0):
        return int(total)
    need = math.ceil(total * ESS_MARGIN * spec.ess / ess) - total
    if rhat > spec.rhat:
        excess = (rhat - 1.0) / (spec.rhat - 1.0)
        need = max(need, math.ceil(total * RHAT_MARGIN * excess) - total)
    return int(min(total, max(floor, need)))


def sample_to_target(
    run: Callable,
    finish: Callable,
    align_more: Callable,
    free_names: list[str],
    *,
    spec: TargetSpec,
    draws: int,
    tune: int,
    initvals,
    random_seed,
    started: float,
    owner: str,
    thin: Callable[[int], None] | None = None,
):
    """Batches of draws until ``spec`` is reached or its time is up: the finished result.

    The first batch is finished (``finish``: aligned) as a plain run is; each further
    one is aligned to the mean of the draws aligned so far (``align_more``) and
    appended, and the check computes the r-hat and ESS of the entries that were near
    or short of the target at the check before (:func:`_watch`; vectorized,
    :func:`entry_stats`), so that a check costs one pass over the new draws and a few
    entries' statistics. Where the check finds the target reached, and where the
    time is up, every batch's draws are finished together as a plain run of that
    length would be, and the target is judged on that result and every entry (the
    attrs record its r-hat and ESS); where that misses the target (an entry left out
    of the check fell back, or the alignment of every draw moved one), the batches go
    on.

    Parameters
    ----------
    run : callable ``(draws, tune, initvals, random_seed) -> DataTree``
        One batch of the sampler (every chain; as ``run_sampler`` returns it).
    finish : callable ``DataTree -> DataTree``
        Turns the raw draws so far into the result (alignment, attrs, data groups);
        it must not change its argument's draws.
    align_more : callable ``(DataTree, Dataset) -> Dataset``
        A further batch's raw draws aligned to a posterior aligned so far.
    free_names : list of str
        The model's free variables: each chain's last draw of them starts its next
        batch.
    spec : TargetSpec
    draws, tune : int
        The first batch (``tune`` in the first batch only).
    initvals : list of dict or None
        The chains' starts of the first batch.
    random_seed
        Seeds the first batch as given; the further ones from :func:`batch_seed`.
    started : float
        ``time.perf_counter()`` when the call began: ``max_time`` counts from it.
    owner : str
        For the warning.
    thin : callable ``k -> None``, optional
        Makes the further batches' draws ``k`` times as many steps apart. Where
        given and the first batch misses the target, its draws are thinned by
        :func:`thin_factor` of its slowest entry and ``thin(k)`` called, so that
        every chain's draws stay equally spaced (the attrs record
        ``target_thin``).

    Returns
    -------
    xarray.DataTree
        ``finish`` of every batch's draws joined per chain, with the target's attrs.
    """
    raw = result = aligned = watch = None
    lengths: list[int] = []
    seconds: list[float] = []
    checks: list[float] = []
    sampling = 0.0
    entropy = None
    thinned = 1
    seed = random_seed
    n, n_tune = draws, tune
    while True:
        t0 = time.perf_counter()
        batch = run(draws=n, tune=n_tune, initvals=initvals, random_seed=seed)
        sampling += float(batch.posterior.attrs.get("sampling_time", 0.0))
        t1 = time.perf_counter()
        raw = batch if raw is None else _join(raw, batch)
        lengths.append(n)
        if result is None and aligned is None:  # the first batch: as a plain run
            result = finish(raw.copy())
            aligned = result["posterior"].to_dataset()
            stats = entry_stats(aligned)
        else:  # aligned batch by batch; only the entries near the target computed
            result = None
            aligned = _append(aligned, align_more(batch, aligned))
            stats = entry_stats(aligned, watch)
        rhat, ess = _worst(*stats[1:])
        reached = rhat <= spec.rhat and ess >= spec.ess
        if thin is not None and not reached and len(lengths) == 1:
            k = thin_factor(n, aligned.sizes["chain"], ess)
            if k > 1:  # one draw in k kept, and the further batches k times sparser
                thinned *= k
                thin(k)
                raw, result = _thin(raw, k), None
                aligned = _thin_draws(aligned, k)
                lengths[-1] = aligned.sizes["draw"]
                stats = entry_stats(aligned)
                rhat, ess = _worst(*stats[1:])
        if reached and result is None:  # judged on the result as returned, every entry
            aligned = None  # (not held beside the result being made)
            result = finish(raw.copy())
            aligned = result["posterior"].to_dataset()
            stats = entry_stats(aligned)
            rhat, ess = _worst(*stats[1:])
            reached = rhat <= spec.rhat and ess >= spec.ess
        watch = _watch(*stats, spec)
        seconds.append(time.perf_counter() - t0)
        checks.append(time.perf_counter() - t1)
        if reached:
            break
        total = sum(lengths)
        n = _next_length(total, rhat, ess, spec)
        if spec.max_time is not None:
            left = spec.max_time - (time.perf_counter() - started)
            # the last batch's speed, its check included: what fits in the time left
            fits = int(left / seconds[-1] * lengths[-1]) if left > 0 else 0
            if fits < max(1, math.ceil(MIN_BATCH_SHARE * total)):
                break
            n = min(n, fits)
        if entropy is None:
            entropy = _entropy(random_seed)
        seed = batch_seed(entropy, len(lengths))
        initvals = _last_draws(raw, free_names)
        n_tune = 0
    if result is None:  # the time is up: every batch finished together
        t1 = time.perf_counter()
        aligned = None
        result = finish(raw.copy())
        rhat, ess = target_stats(result)
        reached = rhat <= spec.rhat and ess >= spec.ess
        checks[-1] += time.perf_counter() - t1
    elapsed = time.perf_counter() - started
    attrs = result["posterior"].attrs
    attrs["sampling_time"] = sampling
    attrs["target_ess"] = spec.ess
    attrs["target_rhat"] = spec.rhat
    if spec.max_time is not None:
        attrs["target_max_time"] = spec.max_time
    attrs["target_reached"] = int(reached)  # netCDF has no boolean attributes
    attrs["target_rhat_max"] = rhat
    attrs["target_ess_bulk_min"] = ess
    attrs["target_batches"] = [int(v) for v in lengths]
    attrs["target_thin"] = int(thinned)
    attrs["target_batch_seconds"] = [float(v) for v in seconds]
    attrs["target_check_seconds"] = [float(v) for v in checks]
    attrs["total_time"] = elapsed
    if not reached:
        chains = result["posterior"].sizes["chain"]
        warnings.warn(
            f"{owner}: the target (r-hat <= {spec.rhat:g}, bulk ESS >= {spec.ess:g} on "
            f"every entry) was not reached within max_time={spec.max_time:g} s: worst "
            f"aligned r-hat {rhat:.4f}, smallest bulk ESS {ess:.1f}, after "
            f"{sum(lengths)} draws per chain ({chains} chains, {len(lengths)} batches, "
            f"tune {tune}) and {elapsed:.1f} s. The draws so far are returned "
            "(posterior.attrs['target_reached'] = 0): raise max_time, or n_sweeps "
            "where the chains mix slowly.",
            ConvergenceWarning,
            stacklevel=4,
        )
    return result
