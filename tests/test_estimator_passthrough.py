"""Every estimator hands each of its arguments, unchanged, to the function it wraps.

The check of TensorLy's ``assert_class_wrapper_correctly_passes_arguments``
(``tensorly/testing.py``): the function is replaced, under the name the estimator's
module calls it by, with a recorder; the estimator is built with a distinct sentinel
for every constructor argument and fitted with sentinels for the ``fit`` arguments it
forwards; each sentinel must arrive as the same object under the function's own name.
It also fails when the function grows an argument the estimator does not expose, or the
estimator one it does not forward, unless the case lists it with a reason.

``VLAD``, ``GDM`` and ``SimplexSPA`` (``bayespmf.estimators.simplex``) run their
pipelines in ``fit`` and call no function that takes their arguments; add a case here
when one exists (``bayespmf.fit`` is meant to hold ``vlad()``/``gdm()``).
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass, field

import numpy as np
import pytest

from bayespmf.estimators import LatentClassPMF
from bayespmf.estimators.purification import PurificationNMF


class _Sentinel:
    """A value no code would build by itself: it can only arrive by being passed."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<sentinel {self.name}>"


class _Called(Exception):
    """Raised by the recorder: what the estimator does with the result is not tested."""


@dataclass
class Case:
    """An estimator, the function it calls, and how its arguments map onto it."""

    estimator: type
    function: str  # the name the estimator's module calls it by
    fit_params: tuple[str, ...] = ()  # fit() arguments forwarded under the same name
    fixed: dict = field(default_factory=dict)  # real values (the estimator uses them)
    fit_args: tuple = ()  # real positional fit() arguments
    not_exposed: dict = field(default_factory=dict)  # function argument -> why
    not_forwarded: dict = field(default_factory=dict)  # estimator argument -> why


CASES = [
    Case(
        LatentClassPMF,
        "fit_latent_class",
        fit_params=("data", "n_categories", "sample_weight", "callback"),
        # fit(n_categories=) is forwarded; the constructor's, its default, is left at
        # None here (two sentinels would disagree, and a disagreement is refused);
        # tests/test_rough_edges.py shows the constructor's reaching the fit
        fixed={"n_categories": None},
        not_exposed={"owner": "the estimator names itself in the messages"},
    ),
    Case(
        PurificationNMF,
        "purification",
        fixed={"n_components": 2},
        fit_args=(np.random.default_rng(0).random((20, 4)),),
        not_exposed={
            "y": "fit(Y) converts Y to a float array first",
            "init": "fit(Y, init=) defaults it to SPA on the rows and checks its shape",
            "owner": "the estimator names itself in the messages",
        },
        not_forwarded={"n_components": "the shape of init carries it"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.estimator.__name__)
def test_estimator_passes_every_argument(monkeypatch, case):
    module = sys.modules[case.estimator.__module__]
    signature = inspect.signature(getattr(module, case.function))
    received = {}

    def recorder(*args, **kwargs):
        received.update(signature.bind(*args, **kwargs).arguments)
        raise _Called

    monkeypatch.setattr(module, case.function, recorder)
    ctor = [p for p in inspect.signature(case.estimator).parameters if p not in case.fixed]
    sent = {name: _Sentinel(name) for name in ctor}
    fit_sent = {name: _Sentinel(name) for name in case.fit_params}
    fit = inspect.signature(case.estimator.fit).parameters
    fit_pos = [n for n in case.fit_params if fit[n].kind is fit[n].POSITIONAL_OR_KEYWORD]
    est = case.estimator(**sent, **case.fixed)
    with pytest.raises(_Called):
        est.fit(
            *case.fit_args,
            *(fit_sent[n] for n in fit_pos),
            **{n: fit_sent[n] for n in case.fit_params if n not in fit_pos},
        )

    for name, value in (sent | fit_sent).items():
        if name in case.not_forwarded:
            continue
        assert name in received, f"{case.estimator.__name__} does not pass {name!r}"
        assert received[name] is value, (
            f"{case.estimator.__name__} passes {received[name]!r} as {name!r}, not the "
            f"value it was given"
        )
    known = set(sent) | set(fit_sent) | set(case.not_exposed) | set(case.fixed)
    missing = [p for p in signature.parameters if p not in known]
    assert not missing, (
        f"{case.function} takes {missing}, which {case.estimator.__name__} does not "
        "expose; expose them or list them in the case's not_exposed"
    )
    stale = set(case.not_exposed) - set(signature.parameters)
    assert not stale, f"not_exposed names arguments {case.function} lacks: {stale}"
