"""Memory a latent-class fit needs, against the memory the machine has.

:func:`memory_estimate` scales measured bytes per entry (:data:`MEMORY_PER_ENTRY`)
by what each stage of a method holds; :func:`check_memory` refuses a fit whose
required stages cannot fit (``InsufficientMemoryError``, a ``ValueError``) before it
allocates, and the multi-start search leaves out or batches its optional stages
(``MemoryBudgetWarning``).
"""

from __future__ import annotations

import numpy as np

from bayespmf.fit import defaults

__all__ = [
    "MEMORY_PER_ENTRY",
    "PAIRWISE_METHODS",
    "InsufficientMemoryError",
    "MemoryBudgetWarning",
    "available_memory",
    "check_memory",
    "format_gib",
    "memory_estimate",
    "rows_of",
]


#: Peak bytes of a fit's stages per entry of what each scales with, measured with
#: tracemalloc (the NumPy arrays of whole fits), with a margin on top (the measured
#: copies are in :ref:`bench-memory`): ``"pairwise"`` per entry of the ``(sum I)^2``
#: pairwise block matrix (CNMF-SPA holds several float64 copies of it: the marginals,
#: pair weights, its misfit buffer, the bootstrap's model, replicate and draw plan;
#: the most for wide binary data; CNMF-OPT fewer); ``"triple"`` per entry of all triple
#: marginals (``sum_{j<k<l} I_j I_k I_l``; CTD); ``"projection"`` per entry of JUROR's
#: pair Gram matrices and scatter matrix (``sum_{j<k} (I_j I_k)^2 + (sum I)^2``; more
#: on small problems, where its fixed costs weigh); ``"explore"`` per entry of the
#: stacked factors of all starts of ``"auto"`` (``n_init (sum I) F``); ``"rows"`` per
#: code (``S N``; EM and SQUAREM-PMF); ``"factors"`` per factor entry (``(sum I) F``;
#: SQUAREM-PMF, far more than EM).
MEMORY_PER_ENTRY = {
    "pairwise": 128,
    "triple": 48,
    "projection": 128,
    "explore": 224,
    "rows": 64,
    "factors": 4096,
}

#: Methods that factor the pairwise marginals (a ``(sum I)^2`` matrix).
PAIRWISE_METHODS = ("cnmf-spa", "cnmf-opt", "cnmf-spa-em", "cnmf-spa-squarem")


class MemoryBudgetWarning(UserWarning):
    """A stage of a fit was left out because its arrays would not fit in memory."""


class InsufficientMemoryError(ValueError, MemoryError):
    """The fit asked for needs more memory than is available (a ``ValueError``)."""


def available_memory() -> int | None:
    """Bytes of memory this process can still allocate, or None when unknown.

    The smallest of the system's available memory (``MemAvailable`` of /proc/meminfo
    on Linux, else :mod:`psutil` when it is installed) and the room left under a
    cgroup v2 memory limit (containers). :func:`~bayespmf.fit.fit_latent_class` compares
    :func:`memory_estimate` with it before allocating.

    Examples
    --------
    >>> m = available_memory()
    >>> m is None or m >= 0
    True
    """
    found = []
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    if not found:
        try:
            import psutil

            found.append(int(psutil.virtual_memory().available))
        except Exception:  # not installed, or no reading on this platform
            pass
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            limit = fh.read().strip()
        with open("/sys/fs/cgroup/memory.current") as fh:
            used = int(fh.read().strip())
        if limit != "max":
            found.append(max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def format_gib(n_bytes: float) -> str:
    """Bytes in GiB, three significant digits (``"1.5 GiB"``)."""
    return f"{n_bytes / 2**30:.3g} GiB"


def memory_estimate(
    method: str,
    n_categories,
    n_components: int,
    *,
    n_rows: int = 0,
    n_init: int | None = None,
) -> dict[str, int]:
    """Estimated peak bytes of each stage of ``fit_latent_class(method=method)``.

    Parameters
    ----------
    method : str
        A key of :data:`METHODS`.
    n_categories : sequence of int
        Alphabet sizes ``I_n``.
    n_components : int
    n_rows : int, default 0
        Rows ``S`` of the data (0: leave the row passes out).
    n_init : int, optional
        Starts of ``"auto"`` (default :data:`DEFAULT_N_INIT`).

    Returns
    -------
    dict
        ``{stage: bytes}``; the stages run one after another, so a fit needs about the
        largest. ``"EM"`` (every method: the rows and factors), ``"pairwise
        marginals"`` (the CNMF methods, and the CNMF-SPA start of ``"auto"``),
        ``"triple marginals"`` (CTD), ``"projection marginals"`` (JUROR) and
        ``"exploration"`` (``"auto"``: all starts at once; it runs in smaller batches
        of starts when that does not fit). Scaled from :data:`MEMORY_PER_ENTRY`.

    Examples
    --------
    >>> est = memory_estimate("cnmf-spa", [100_000, 2], 2, n_rows=10)
    >>> round(est["pairwise marginals"] / 2**30)
    1192
    >>> est["EM"] < 2**30
    True
    """
    n_cat = [int(i) for i in np.asarray(n_categories).ravel()]
    total = sum(n_cat)
    per = MEMORY_PER_ENTRY
    out = {
        "EM": per["rows"] * int(n_rows) * len(n_cat) + per["factors"] * total * n_components
    }
    if method in (*PAIRWISE_METHODS, "auto"):
        out["pairwise marginals"] = per["pairwise"] * total**2
    if method == "auto":
        starts = defaults.DEFAULT_N_INIT if n_init is None else int(n_init)
        out["exploration"] = per["explore"] * starts * total * n_components
    if method == "ctd":
        e1 = e2 = e3 = 0  # elementary symmetric sums: e3 = sum_{j<k<l} I_j I_k I_l
        for i in n_cat:
            e3, e2, e1 = e3 + e2 * i, e2 + e1 * i, e1 + i
        out["triple marginals"] = per["triple"] * e3
    if method.startswith("juror"):
        squares = [i * i for i in n_cat]
        pair_grams = (sum(squares) ** 2 - sum(s * s for s in squares)) // 2
        out["projection marginals"] = per["projection"] * (pair_grams + total**2)
    return out


def rows_of(source) -> int:
    """Rows a data source holds in memory (0 for chunked data)."""
    codes = getattr(source, "codes", None)
    return int(codes.shape[0]) if codes is not None else 0


def check_memory(method, source, n_components, n_init, owner) -> None:
    """Refuse a fit whose required stages cannot fit in the available memory.

    ``"auto"``'s CNMF-SPA start and exploration are not required: they are left out
    or batched at run time (:func:`bayespmf.fit.multistart.multistart`).
    """
    budget = available_memory()
    if budget is None:
        return
    n_cat = source.n_categories
    need = memory_estimate(
        method, n_cat, n_components, n_rows=rows_of(source), n_init=n_init
    )
    if method == "auto":
        need = {"EM": need["EM"]}
    stage, required = max(need.items(), key=lambda item: item[1])
    if required <= budget:
        return
    em_need = memory_estimate("em", n_cat, n_components, n_rows=rows_of(source))["EM"]
    total = int(np.sum(n_cat))
    if stage == "EM" or em_need > budget:
        fix = (
            "Fit fewer rows or variables, merge rare categories, or free memory."
            if stage == "EM"
            else f"method='em' needs about {format_gib(em_need)} and does not fit either."
        )
    else:
        fix = (
            f"Use method='em' (about {format_gib(em_need)}) or method='auto', which leave "
            "these statistics out, or merge rare categories."
        )
    raise InsufficientMemoryError(
        f"{owner}(method={method!r}) needs about {format_gib(required)} for its {stage} "
        f"(sum of n_categories = {total}, largest alphabet {int(np.max(n_cat))}), "
        f"more than the {format_gib(budget)} of memory available. {fix}"
    )
