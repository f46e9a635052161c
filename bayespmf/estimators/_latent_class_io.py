"""What a saved :class:`~bayespmf.estimators.LatentClassPMF` holds, and its rebuild.

``.npz`` (:class:`~bayespmf.estimators._persistence.NpzPersistence`) and netCDF-4
(:mod:`bayespmf.io`) write what ``_saved_state`` returns and load through
``_from_saved``. Private to :mod:`bayespmf.estimators`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayespmf._npz import decode_value, encode_value
from bayespmf._validation import DataValidationError
from bayespmf.estimators._persistence import check_labels, corrupt_fit
from bayespmf.pmf import check_params

__all__ = ["LatentClassSavedState"]


class LatentClassSavedState:
    """The content of a saved fit: every parameter and fitted attribute, exactly.

    The class using it defines ``_PARAMS`` (the constructor parameters, in order),
    ``_check_fitted()`` and ``_set_fitted(params, n_categories)``.
    """

    #: Fitted attributes saved as arrays (``n_categories_``: their shapes); the others go
    #: to the metadata, encoded exactly.
    _SAVED_ARRAYS = (
        "weights_",
        "factors_",
        "n_categories_",
        "loglik_trace_",
        "optima_params_",
    )

    def _saved_state(self) -> tuple[dict, dict]:
        """What :meth:`save` and :func:`bayespmf.io.save` write: metadata and arrays.

        The metadata keeps the plain JSON keys of bayespmf 0.2 (``params`` without
        ``random_state``, ``n_iter``, ``names``, ...) for older readers, and under
        ``exact`` every parameter and every fitted attribute that is not an array here,
        encoded by :func:`bayespmf._npz.encode_value`.
        """
        self._check_fitted()
        params = self.get_params(deep=False)
        plain = {k: v for k, v in params.items() if k != "random_state"}
        if not isinstance(plain["init"], str):  # older readers: given starts not kept
            plain["init"] = "auto"
        optima = getattr(self, "optima_", None)
        attributes = {
            k: v
            for k, v in vars(self).items()
            if k not in self._PARAMS and k not in self._SAVED_ARRAYS
        }
        meta = {
            "params": plain,
            "n_iter": int(self.n_iter_),
            "converged": bool(self.converged_),
            "loglik": float(getattr(self, "loglik_", np.nan)),
            "n_init_best": getattr(self, "n_init_best_", None),
            "optima": None if optima is None else optima.to_dict(orient="list"),
            "names": getattr(self, "_names", None),
            "categories": getattr(self, "_categories", None),
            "exact": encode_value({"params": params, "attributes": attributes}),
        }
        arrays = {
            "weights": np.asarray(self.weights_, dtype=float),
            "loglik_trace": np.asarray(self.loglik_trace_, dtype=float),
        }
        arrays |= {f"factor_{n}": np.asarray(a) for n, a in enumerate(self.factors_)}
        for k, p in enumerate(getattr(self, "optima_params_", None) or []):
            arrays[f"optimum_{k}_weights"] = np.asarray(p.weights)
            arrays.update(
                {f"optimum_{k}_factor_{n}": np.asarray(a) for n, a in enumerate(p.factors)}
            )
        return meta, arrays

    @classmethod
    def _from_saved(cls, arrays: dict, meta: dict, path):
        """Rebuild and validate a fit from what :meth:`_saved_state` wrote.

        Files of bayespmf <= 0.2 have no ``exact`` key: their plain keys are read.
        """

        def corrupt(what: str):
            return corrupt_fit(path, "LatentClassPMF", what)

        n_factors = sum(1 for k in arrays if k.startswith("factor_"))
        try:
            weights = arrays["weights"]
            factors = [arrays[f"factor_{n}"] for n in range(n_factors)]
            trace = np.asarray(arrays["loglik_trace"])
        except KeyError as err:
            raise corrupt(f"the array {err} is missing") from None
        try:
            params = check_params(weights, factors)
        except DataValidationError as err:
            raise corrupt(str(err).rstrip(".")) from None
        if n_factors == 0:
            raise corrupt("it holds no factors")
        if trace.ndim != 1 or trace.dtype.kind != "f":
            raise corrupt(f"'loglik_trace' must be a 1-D float array; got {trace.shape}")
        optima_params = []
        while f"optimum_{len(optima_params)}_weights" in arrays:
            k = len(optima_params)
            try:
                p = check_params(
                    arrays[f"optimum_{k}_weights"],
                    [arrays[f"optimum_{k}_factor_{n}"] for n in range(n_factors)],
                )
            except (KeyError, DataValidationError) as err:
                raise corrupt(f"optimum {k}: {err}") from None
            if [a.shape for a in p.factors] != [a.shape for a in params.factors]:
                raise corrupt(f"optimum {k} has other shapes than the factors")
            optima_params.append(p)
        if "exact" in meta:
            exact = decode_value(meta["exact"], path=path)
            try:
                given, attributes = dict(exact["params"]), dict(exact["attributes"])
            except (KeyError, TypeError, ValueError):
                raise corrupt("the saved parameters are malformed") from None
        else:  # bayespmf <= 0.2: the plain keys (loglik_ etc. absent from netCDF)
            given = dict(meta.get("params", {}))
            optima = meta.get("optima")
            attributes = {
                "loglik_": meta.get("loglik", np.nan),
                "optima_": (
                    None if optima is None else pd.DataFrame(optima).rename_axis("optimum")
                ),
                "n_init_best_": meta.get("n_init_best"),
                "n_iter_": meta.get("n_iter", 0),
                "converged_": meta.get("converged", True),
                "info_": {},
                "_names": meta.get("names"),
                "_categories": meta.get("categories"),
            }
        given.setdefault("n_components", params.weights.size)
        if set(given) - set(cls._PARAMS):
            raise corrupt(f"unknown parameters {sorted(set(given) - set(cls._PARAMS))}")
        if given["n_components"] != params.weights.size:
            raise corrupt(
                f"rank {given['n_components']!r} but {params.weights.size} weights"
            )
        for name in attributes:
            fitted = name.endswith("_") and not name.startswith("_")
            if not (fitted or name in ("_names", "_categories")) or hasattr(cls, name):
                raise corrupt(f"unknown attribute {name!r}")
        check_labels(
            attributes.get("_names"),
            attributes.get("_categories"),
            [a.shape[0] for a in params.factors],
            corrupt,
        )
        model = cls(**given)
        model._set_fitted(params, [a.shape[0] for a in params.factors])
        model.loglik_trace_ = trace
        model.optima_params_ = optima_params or None
        for name, value in attributes.items():
            setattr(model, name, value)
        return model
