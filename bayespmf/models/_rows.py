"""The class-summed log-likelihood of rows, shared by the PyMC latent-class models."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt

from bayespmf._validation import DataValidationError

__all__ = ["class_summed_loglik", "rows_signature", "static_categories"]


def static_categories(factors, *, require_matrix: bool = True) -> list[int]:
    """The static number of categories ``I_n`` of each ``(rank, I_n)`` factor tensor."""
    sizes = []
    for n, a in enumerate(factors):
        ok = a.type.ndim == 2 or not require_matrix
        k = a.type.shape[-1] if ok else None
        if k is None:
            raise DataValidationError(
                f"factors[{n}] must be a (rank, I_n) tensor with a static number of "
                f"categories I_n; got type {a.type}."
            )
        sizes.append(int(k))
    return sizes


def class_summed_loglik(value, log_prior, factors, n_cat) -> pt.TensorVariable:
    r"""``log sum_f exp(log_prior_f + sum_{n observed} log A_n(x_n, f))`` per row.

    The one-hot design of the observed entries, ``O[s, off_n + i] = [x_sn = i]`` (a
    missing entry, ``-1``, matches no column), is built from the codes inside the
    graph, so the data stay data (``pm.Data``), and multiplied with the stacked
    ``log A_n``: the one-hot product of the EM map, the fastest formulation in
    STACK-NOTES.md. With frozen data PyTensor folds ``O`` at compile time. Rows with a
    code outside ``[-1, I_n)`` have log-probability ``-inf``. ``log_prior`` is ``(F,)``
    or per row ``(..., S, F)``; ``factors`` are ``(F, I_n)`` tensors.
    """
    var_of_col = np.repeat(np.arange(len(n_cat)), n_cat)
    code_of_col = np.concatenate([np.arange(k) for k in n_cat]).astype(value.dtype)
    one_hot = pt.cast(pt.eq(value[..., var_of_col], code_of_col), pytensor.config.floatX)
    log_a = pt.concatenate([pt.log(a).T for a in factors], axis=0)  # (sum I_n, F)
    loglik = pt.logsumexp(pt.dot(one_hot, log_a) + log_prior, axis=-1)
    valid = pt.all((value >= -1) & (value < np.asarray(n_cat)), axis=-1)
    return pt.switch(valid, loglik, -np.inf)


def rows_signature(n_variables: int) -> str:
    """The ``pm.CustomDist`` signature: a prior ``(f)``, N factors, rows of N codes."""
    return "(f)," + ",".join(f"(f,i{n})" for n in range(n_variables)) + "->(n)"
