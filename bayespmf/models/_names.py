"""Names shared by the PyMC latent-class models (variables, dims, data)."""

from __future__ import annotations

__all__ = [
    "DATA_NAME",
    "OBSERVED_NAME",
    "OUTCOME_DATA_NAME",
    "OUTCOME_NAME",
    "category_dim",
    "factor_var_name",
]

#: Name of the ``pm.Data`` container holding the rows' codes in
#: :func:`latent_class_model` (dims ``("row", "variable")``; ``-1`` = missing).
DATA_NAME = "rows"

#: Name of the observed :class:`LatentClassRows` variable in :func:`latent_class_model`
#: (and so of its ``log_likelihood`` and ``posterior_predictive`` entries).
OBSERVED_NAME = "x"

#: Name of the observed distal outcome of ``latent_class_model(..., outcome=y)``
#: (dims ``outcome_row``), and of the ``pm.Data`` container holding its values.
OUTCOME_NAME = "y"
OUTCOME_DATA_NAME = "outcome"


def factor_var_name(name: str) -> str:
    """Name of the PyMC variable holding the factor of data variable ``name``.

    Examples
    --------
    >>> factor_var_name("lug_boot")
    'A_lug_boot'
    """
    return f"A_{name}"


def category_dim(name: str) -> str:
    """Name of the category dimension of data variable ``name``.

    Examples
    --------
    >>> category_dim("lug_boot")
    'lug_boot_category'
    """
    return f"{name}_category"
