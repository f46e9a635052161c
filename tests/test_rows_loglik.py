"""The fused class-summed log-likelihood Op against brute force and the one-hot graph."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, distribution

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.compile.mode import Mode
from pytensor.gradient import verify_grad

from bayespmf.models import _rows
from bayespmf.models._rows import ClassSummedLoglik, class_summed_loglik

N_CAT = [3, 4, 2]
RANK = 3


def installed(name: str) -> bool:
    """Whether a distribution is installed, by its metadata.

    Not ``importlib.util.find_spec``: ArviZ 1 leaves a lazy placeholder module named
    ``jax`` whose ``__spec__`` imports JAX, which would import it at collection and send
    every later multi-chain PyMC run of the process to a forkserver.
    """
    try:
        distribution(name)
    except PackageNotFoundError:
        return False
    return True


def brute_force(codes, log_prior, factors):
    """Row by row, class by class: log sum_f prior_f prod_n A_n(x_n, f)."""
    out = np.empty(len(codes))
    for s, row in enumerate(codes):
        lp = log_prior if log_prior.ndim == 1 else log_prior[s]
        if any(c < -1 or c >= k for c, k in zip(row, N_CAT, strict=True)):
            out[s] = -np.inf
            continue
        total = 0.0
        for f in range(RANK):
            p = np.exp(lp[f])
            for n, c in enumerate(row):
                if c >= 0:
                    p *= factors[n][f, c]
            total += p
        out[s] = np.log(total) if total > 0 else -np.inf
    return out


@pytest.fixture
def case():
    rng = np.random.default_rng(3)
    codes = np.stack([rng.integers(-1, k, 40) for k in N_CAT], axis=1)
    codes[0] = -1  # a row with every entry missing: log 1 = 0
    factors = [rng.dirichlet(np.ones(k), size=RANK) for k in N_CAT]  # (F, I_n)
    log_w = np.log(rng.dirichlet(np.ones(RANK)))
    return codes, log_w, factors


def symbolic(per_row: bool):
    fs = [pt.tensor(shape=(RANK, k), dtype="float64") for k in N_CAT]
    prior = pt.dmatrix() if per_row else pt.tensor(shape=(RANK,), dtype="float64")
    codes = pt.lmatrix()
    return codes, prior, fs


def compiled(per_row: bool, fused: bool, mode=None, monkeypatch=None):
    monkeypatch.setattr(_rows, "FUSED", fused)
    codes, prior, fs = symbolic(per_row)
    ll = class_summed_loglik(codes, prior, fs, N_CAT)
    grads = pytensor.grad(ll.sum(), [prior, *fs])
    return pytensor.function([codes, prior, *fs], [ll, *grads], mode=mode)


@pytest.mark.parametrize("per_row", [False, True])
def test_loglik_matches_brute_force_and_gradient_the_one_hot_graph(
    case, per_row, monkeypatch
):
    codes, log_w, factors = case
    rng = np.random.default_rng(0)
    prior = np.log(rng.dirichlet(np.ones(RANK), size=len(codes))) if per_row else log_w
    fused = compiled(per_row, True, monkeypatch=monkeypatch)
    graph = fused.maker.fgraph
    assert any(isinstance(n.op, ClassSummedLoglik) for n in graph.apply_nodes)
    got = fused(codes, prior, *factors)
    np.testing.assert_allclose(
        got[0], brute_force(codes, prior, factors), rtol=1e-12, atol=1e-14
    )
    one_hot = compiled(per_row, False, monkeypatch=monkeypatch)
    assert not any(
        isinstance(n.op, ClassSummedLoglik) for n in one_hot.maker.fgraph.apply_nodes
    )
    want = one_hot(codes, prior, *factors)
    for g, w in zip(got[1:], want[1:], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_gradient_matches_finite_differences(case):
    codes, log_w, factors = case
    rng = np.random.default_rng(1)
    per_row = np.log(rng.dirichlet(np.ones(RANK), size=len(codes)))

    def cost(prior, *fs):
        return class_summed_loglik(pt.as_tensor(codes), prior, list(fs), N_CAT).sum()

    verify_grad(cost, [log_w, *factors], rng=rng)
    verify_grad(cost, [per_row, *factors], rng=rng)


def test_invalid_codes_and_impossible_rows(case, monkeypatch):
    codes, log_w, factors = case
    codes = codes.copy()
    codes[1, 0] = 3  # outside [-1, I_0)
    codes[2, 1] = -2
    factors = [a.copy() for a in factors]
    codes[3] = [0, -1, -1]
    factors[0][:, 0] = 0.0  # no class can produce x_0 = 0
    before = [codes.copy(), *(a.copy() for a in factors)]
    fn = compiled(False, True, monkeypatch=monkeypatch)
    ll, g_prior, *g_fac = fn(codes, log_w, *factors)
    np.testing.assert_array_equal(ll[1:4], -np.inf)
    np.testing.assert_allclose(
        ll, brute_force(codes, log_w, factors), rtol=1e-12, atol=1e-14
    )
    # the impossible rows add nothing to the gradient (and nothing is nan)
    assert np.isfinite(g_prior).all() and all(np.isfinite(g).all() for g in g_fac[1:])
    keep = np.ones(len(codes), bool)
    keep[1:4] = False
    want = fn(codes[keep], log_w, *factors)
    np.testing.assert_allclose(g_prior, want[1], rtol=1e-12)
    for a, b in zip(before, [codes, *factors], strict=True):  # inputs untouched
        np.testing.assert_array_equal(a, b)


def test_shared_prior_row_and_row_count_check(case):
    codes, log_w, factors = case
    fs = [pt.tensor(shape=(RANK, k), dtype="float64") for k in N_CAT]
    row = pt.tensor(shape=(1, RANK), dtype="float64")
    ll = class_summed_loglik(pt.as_tensor(codes), row, fs, N_CAT)
    fn = pytensor.function([row, *fs], [ll, pytensor.grad(ll.sum(), row)])
    got, g_row = fn(log_w[None, :], *factors)
    np.testing.assert_allclose(got, brute_force(codes, log_w, factors), atol=1e-12)
    vec = pt.tensor(shape=(RANK,), dtype="float64")
    ll_vec = class_summed_loglik(pt.as_tensor(codes), vec, fs, N_CAT)
    g_vec = pytensor.function([vec, *fs], pytensor.grad(ll_vec.sum(), vec))(log_w, *factors)
    np.testing.assert_allclose(g_row[0], g_vec, rtol=1e-12)
    per_row = pt.dmatrix()
    ll_rows = class_summed_loglik(pt.as_tensor(codes), per_row, fs, N_CAT)
    bad = pytensor.function([per_row, *fs], ll_rows)
    with pytest.raises(ValueError, match="one row per row of codes"):
        bad(np.tile(log_w, (len(codes) - 1, 1)), *factors)


def test_responsibilities_are_not_differentiable(case):
    codes = case[0]
    prior = pt.dvector()
    log_a = pt.dmatrix()
    _, resp = ClassSummedLoglik(N_CAT)(pt.as_tensor(codes), prior, log_a)
    with pytest.raises(NotImplementedError, match="responsibilities"):
        pytensor.grad(resp.sum(), log_a)


@pytest.mark.parametrize(
    "mode",
    [
        "NUMBA",
        pytest.param(
            "JAX",
            marks=[
                pytest.mark.jax,
                pytest.mark.skipif(not installed("jax"), reason="jax not installed"),
            ],
        ),
    ],
)
def test_backends_agree_with_the_c_backend(case, mode):
    codes, log_w, factors = case
    fs = [pt.tensor(shape=(RANK, k), dtype="float64") for k in N_CAT]
    prior = pt.tensor(shape=(RANK,), dtype="float64")
    ll = class_summed_loglik(pt.as_tensor(codes), prior, fs, N_CAT)  # rows constant
    outs = [ll, *pytensor.grad(ll.sum(), [prior, *fs])]
    c_mode = Mode(linker="cvm", optimizer="fast_run")  # PyTensor 3's default is numba
    want = pytensor.function([prior, *fs], outs, mode=c_mode)(log_w, *factors)
    fn = pytensor.function([prior, *fs], outs, mode=mode)
    nodes = fn.maker.fgraph.apply_nodes
    # numba runs the fused kernel; JAX runs the gather graph it is rewritten into
    assert any(isinstance(n.op, ClassSummedLoglik) for n in nodes) == (mode == "NUMBA")
    got = fn(log_w, *factors)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-10, atol=1e-12)
