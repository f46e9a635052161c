"""One name per concept across the public API (docs/vocabulary.md).

Every public callable (the ``__all__`` of every public module, and the public methods
of public classes) is read by ``inspect``: none takes a pre-release name for the number
of components, scikit-learn-style code (estimators, fit functions, data generators)
seeds by ``random_state`` and PyMC-facing code (``bayespmf.models``) by
``random_seed``.
"""

import importlib
import inspect
import pkgutil

import pytest

import bayespmf

#: Parameter names that the vocabulary retired, and the name that replaced each.
RETIRED = {"rank": "n_components", "n_vertices": "n_components", "ranks": "candidates"}


def _public_modules():
    names = ["bayespmf"]
    for info in pkgutil.walk_packages(bayespmf.__path__, "bayespmf."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    out = []
    for name in names:
        try:
            out.append(importlib.import_module(name))
        except ImportError:  # an optional extra (e.g. dask) that is not installed
            continue
    return out


def _public_callables():
    seen = set()
    for module in _public_modules():
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name, None)
            targets = []
            if inspect.isclass(obj):
                targets.append((f"{obj.__module__}.{obj.__qualname__}", obj.__init__))
                for attr, member in vars(obj).items():
                    if callable(member) and not attr.startswith("_"):
                        targets.append(
                            (f"{obj.__module__}.{obj.__qualname__}.{attr}", member)
                        )
            elif callable(obj):
                targets.append(
                    (f"{getattr(obj, '__module__', module.__name__)}.{name}", obj)
                )
            for label, func in targets:
                if id(func) in seen:
                    continue
                seen.add(id(func))
                try:
                    params = inspect.signature(func).parameters
                except (TypeError, ValueError):
                    continue
                yield label, params


CALLABLES = sorted(_public_callables(), key=lambda item: item[0])


def test_the_walk_finds_the_public_api():
    labels = {label for label, _ in CALLABLES}
    assert "bayespmf.estimators.latent_class.LatentClassPMF" in labels
    assert "bayespmf.models.latent_class.latent_class_model" in labels
    assert len(CALLABLES) > 150


@pytest.mark.parametrize(("label", "params"), CALLABLES, ids=[c[0] for c in CALLABLES])
def test_no_retired_parameter_name(label, params):
    bad = {p: RETIRED[p] for p in params if p in RETIRED}
    assert not bad, f"{label} takes {bad} (old name: new name)"


def test_seed_names_follow_each_ecosystem():
    wrong = []
    for label, params in CALLABLES:
        pymc_facing = label.startswith("bayespmf.models.") or label.endswith("sample_gibbs")
        if pymc_facing and "random_state" in params:
            wrong.append(f"{label}: random_state (PyMC-facing: random_seed)")
        if not pymc_facing and "random_seed" in params:
            wrong.append(f"{label}: random_seed (scikit-learn style: random_state)")
    assert not wrong, wrong
