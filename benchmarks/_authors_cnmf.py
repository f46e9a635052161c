"""Run the CNMF authors' public MATLAB code under GNU Octave on our simulated data.

Ibrahim & Fu publish their code at github.com/shahanaibrahimosu/joint-probability-
estimation. It is not part of bayespmf and nothing of it is copied here: the user
points ``--authors-code`` at their own checkout of the folder
``jointprobability_code_tsp/JointProbability_synthetic``. This module writes the data
of one trial to CSV files, copies the checkout's ``functions`` folder to a temporary
directory with one Octave compatibility edit (Octave 7 has no ``sum(x, "all")``; it
becomes ``sum(x(:))``; likewise in ``functions_mle``), writes a small driver that
calls their functions exactly as their experiment scripts do
(``main_synthetic1.m`` for Tables 4-5, ``main_synthetic2_seperability.m`` for
Tables 1-3), runs it, and reads back each
method's estimate. The factor MSE is then computed by bayespmf's
:func:`~bayespmf.metrics.factor_mse` on their estimate, next to the MSE their own
``getMSE_nomre.m`` printed, so the two metric implementations are checked against each
other on every run.

Their protocol, as the scripts run it: CNMF-SPA (``SingleSPA``, M = 3, its projected
gradient started from ``rand``); CNMF-OPT (``N_CTF_AO_KL``) from the CNMF-SPA factors
floored at 1e-6 and the *true* prior, at most 200 outer sweeps (500 in the Table 1-3
script) of up to 200 mirror-descent steps per block, outer tolerance 1e-6; the EMs
(``run_EM_mod``) at most 30 iterations, stopped when the factor MSE against the *true*
factors changes by less than 1e-6 relative; RAND-EM from ``gen_PMF_factors``; CTD
(``N_CTF_AO_ADMM_Paper_Notation`` on the triple marginals) from a second
``gen_PMF_factors`` draw, and MLE-AD-EM (20 sweeps of ``functions_mle/run_sweeps.m``
from that draw, then EM), with each script's settings (``ctd_*`` of
:func:`run_authors_code`). Each EM runs twice from the same start: as their script
(the method name with ``-30``) and for :data:`AUTHORS_EM_ROUNDS` rounds without the
stop on the truth, the protocol of our judged EM rows (run to convergence).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from bayespmf.metrics import factor_mse

#: The methods the driver can run, in the order it runs them.
AUTHORS_METHODS = (
    "cnmf-spa",
    "cnmf-opt",
    "cnmf-spa-em",
    "cnmf-spa-em-30",
    "em",
    "em-30",
    "ctd",
    "ad-em",
    "ad-em-30",
)
#: EM rounds of the authors' ``run_EM_mod`` in the runs without ``-30``: as many as
#: our EM's ``max_iter`` (``DEFAULT_MAX_ITER["em"]``), never stopped on the truth.
AUTHORS_EM_ROUNDS = 1000

_DRIVER = r"""
function run_cnmf_authors(datafile, truthfile, outdir, F, M, methods, opt_sweeps, ...
                          ctd_iter, ctd_rho, ctd_uniform_l0, em_rounds)
warning('off', 'all');
dataset = dlmread(datafile, ',');
T = dlmread(truthfile, ',');
[n_items, N] = size(dataset);
l_true = T(1, 1:F)';
I = T(2, 1:N);
offs = [0 cumsum(I)];
A_true = cell(N, 1);
for n = 1:N
  A_true{n} = T(2 + offs(n) + 1 : 2 + offs(n + 1), 1:F);
end
marg = num2cell(nchoosek(1:N, 2), 2);
[Y, ~, ~] = get_obs_marg_fast(dataset, marg, I);
fid = fopen(fullfile(outdir, 'summary.csv'), 'w');
opts = {}; opts.marg = marg; opts.max_iter = 1000; opts.tol = 1e-6;
a = tic; [A_est, l_est] = SingleSPA(Y, I, M, F, opts); t = toc(a);
for i = 1:N, A_est{i}(isnan(A_est{i})) = 0; end
l_est(isnan(l_est)) = 0;
save_est(outdir, 'cnmf-spa', A_est, l_est);
fprintf(fid, 'cnmf-spa,%.12g,%.6g,0\n', getMSE_nomre(A_est, l_est, A_true, l_true), t);
if any(strcmp(methods, 'cnmf-opt'))
  o2 = {};
  for n = 1:N, o2.constraint{n} = 'simplex_col'; end
  o2.constraint{N + 1} = 'simplex';
  o2.max_iter = opt_sweeps; o2.rho = [10 10];
  o2.A0 = A_est; o2.l0 = l_true;
  for i = 1:N
    G = max(o2.A0{i}, 1e-6); o2.A0{i} = G * diag(1 ./ sum(G, 1));
  end
  o2.marg = marg; o2.computeCost = 1; o2.computeMSE = 0;
  o2.computeCostInterval = 20; o2.tol_impr = 1e-6;
  a = tic; [A_o, l_o, Out] = N_CTF_AO_KL(Y, I, F, o2); t = toc(a);
  save_est(outdir, 'cnmf-opt', A_o, l_o);
  fprintf(fid, 'cnmf-opt,%.12g,%.6g,%d\n', getMSE_nomre(A_o, l_o, A_true, l_true), t, ...
          numel(Out.hist_cost));
end
ems = {'cnmf-spa-em', 'cnmf-spa-em-30', 'em', 'em-30', 'ad-em', 'ad-em-30'};
if any(ismember(methods, ems))
  Z = cell(N, 1);
  for n = 1:N
    r = find(dataset(:, n) > 0);
    Z{n} = full(sparse(r, dataset(r, n), 1, n_items, I(n)));
  end
end
% their scripts: 30 rounds, stopped early when the MSE against the true factors
% changes by < 1e-6 relative; '-30' names that run. Without '-30': the same EM run
% for em_rounds rounds without looking at the truth (tol -1 never stops it)
o30 = {}; o30.Nround = 30; o30.A_true = A_true; o30.l_true = l_true; o30.tol = 1e-6;
olong = o30; olong.Nround = em_rounds; olong.tol = -1;
if any(ismember(methods, {'cnmf-spa-em', 'cnmf-spa-em-30'}))
  A0 = A_est;
  for i = 1:N, G = max(A0{i}, eps); A0{i} = G * diag(1 ./ sum(G, 1)); end
  run_em(fid, outdir, 'cnmf-spa-em', methods, A0, l_est, Z, o30, olong, 0, A_true, l_true);
end
if any(ismember(methods, {'em', 'em-30'}))
  [A0, l0] = gen_PMF_factors(I, F);
  run_em(fid, outdir, 'em', methods, A0, l0, Z, o30, olong, 0, A_true, l_true);
end
if any(ismember(methods, {'ctd', 'ad-em', 'ad-em-30'}))
  % CTD (Kargas et al.) on the triple marginals, from gen_PMF_factors; MLE-AD-EM
  % (Yeredor & Haardt): 20 AD sweeps from the same start, then 30 EM rounds
  marg_t = num2cell(nchoosek(1:N, 3), 2);
  Y_t = get_obs_marg_fast(dataset, marg_t, I);
  [A0, l0] = gen_PMF_factors(I, F);
  if ctd_uniform_l0, l0 = ones(F, 1) / F; end
  if any(strcmp(methods, 'ctd'))
    o2 = {};
    for n = 1:N, o2.constraint{n} = 'simplex_col'; end
    o2.constraint{N + 1} = 'simplex';
    o2.max_iter = ctd_iter; o2.rho = ctd_rho;
    o2.A0 = A0; o2.l0 = l0; o2.marg = marg_t;
    o2.computeCost = 1; o2.computeMSE = 0; o2.computeCostInterval = 20;
    o2.tol_impr = 1e-6;
    a = tic; [Ac, lc, Out] = N_CTF_AO_ADMM_Paper_Notation(Y_t, I, F, o2); t = toc(a);
    save_est(outdir, 'ctd', Ac, lc);
    it = ctd_iter; if isfield(Out, 'iter'), it = Out.iter; end
    fprintf(fid, 'ctd,%.12g,%.6g,%d\n', getMSE_nomre(Ac, lc, A_true, l_true), t, it);
  end
  if any(ismember(methods, {'ad-em', 'ad-em-30'}))
    o3 = {}; o3.marg = marg_t; o3.max_iter = 20; o3.tol = 1e-6;
    a = tic; [Aa, la, Out] = run_sweeps(Y_t, A0, l0, o3); t1 = toc(a);
    run_em(fid, outdir, 'ad-em', methods, Aa, la, Z, o30, olong, t1, A_true, l_true);
  end
end
fclose(fid);
end

function run_em(fid, outdir, name, methods, A0, l0, Z, o30, olong, t0, A_true, l_true)
% their run_EM_mod from (A0, l0): as their script ('<name>-30') and/or run long
runs = {[name '-30'], o30; name, olong};
for k = 1:2
  if any(strcmp(methods, runs{k, 1}))
    a = tic; [Ae, le, ts] = run_EM_mod(A0, l0, Z, runs{k, 2}); t = t0 + toc(a);
    save_est(outdir, runs{k, 1}, Ae, le);
    fprintf(fid, '%s,%.12g,%.6g,%d\n', runs{k, 1}, ...
            getMSE_nomre(Ae, le, A_true, l_true), t, numel(ts));
  end
end
end

function save_est(outdir, name, A, l)
dlmwrite(fullfile(outdir, [name '.csv']), [l(:)'; cell2mat(A(:))], 'precision', 17);
end
"""


def run_octave(call: str, work: Path, timeout=None) -> subprocess.CompletedProcess:
    """Run the Octave statement ``call`` (``octave --no-gui --quiet --eval``).

    Its output is kept in ``work / "octave.log"``; the caller checks the files the
    statement was to write.
    """
    proc = subprocess.run(
        ["octave", "--no-gui", "--quiet", "--eval", call],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    (Path(work) / "octave.log").write_text(proc.stdout + proc.stderr)
    return proc


def _patched_functions(checkout: Path, workdir: Path) -> Path:
    """Copy ``functions`` (with its tensorlab) and ``functions_mle`` with the Octave edit.

    Returns the copy of ``functions``; ``functions_mle`` lies beside it.
    """
    src = checkout / "functions"
    if not (src / "SingleSPA.m").exists():
        raise FileNotFoundError(
            f"--authors-code {checkout}: no functions/SingleSPA.m there; point it at "
            "jointprobability_code_tsp/JointProbability_synthetic of a checkout of "
            "shahanaibrahimosu/joint-probability-estimation."
        )
    dst = workdir / "functions"
    shutil.copytree(src, dst)
    if (checkout / "functions_mle").is_dir():  # MLE-AD (Yeredor & Haardt)
        shutil.copytree(checkout / "functions_mle", workdir / "functions_mle")
    pattern = re.compile(r"""sum\(([A-Za-z_{}0-9]+),\s*["']all["']\)""")
    for path in [*dst.glob("*.m"), *(workdir / "functions_mle").glob("*.m")]:
        text = path.read_text(errors="replace")
        new = pattern.sub(r"sum(\1(:))", text)
        if new != text:
            path.write_text(new)
    return dst


def run_authors_code(
    checkout,
    codes,
    truth,
    *,
    methods=AUTHORS_METHODS,
    opt_sweeps=200,
    split=3,
    ctd_iter=500,
    ctd_rho=(0.01, 0.1),
    ctd_uniform_l0=False,
    em_rounds=AUTHORS_EM_ROUNDS,
    timeout=3600,
):
    """Run the authors' pipeline on one data set; ``{method: {...}}`` per method run.

    Parameters
    ----------
    checkout : path
        ``.../JointProbability_synthetic`` of the authors' repository.
    codes : ndarray of int, shape (S, N)
        Our data (``-1`` missing); written 1-based with 0 for missing, as theirs.
    truth : LatentClassTruth
        The true weights and factors (their MSE and EM stopping rule need them).
    methods : sequence of str
        Subset of :data:`AUTHORS_METHODS` (CNMF-SPA always runs: the others start
        from it or are timed next to it).
    opt_sweeps : int
        CNMF-OPT's outer sweeps (200 in their Table 4-5 script, 500 in Tables 1-3).
    split : int
        CNMF-SPA's M.
    ctd_iter, ctd_rho, ctd_uniform_l0
        CTD's (``N_CTF_AO_ADMM_Paper_Notation``) outer iterations, ADMM penalties
        and whether its random start has equal class weights: 500, (0.01, 0.1) and
        no in the Table 1-3 script (``main_synthetic2_seperability.m``), 200,
        (10, 10) and yes in the Table 4-5 script (``main_synthetic1.m``). MLE-AD-EM
        (Tables 1-3 only, as in the paper) runs 20 AD sweeps of their
        ``functions_mle/run_sweeps.m`` from CTD's start, then EM.
    em_rounds : int
        EM rounds (``run_EM_mod``) of ``"cnmf-spa-em"``, ``"em"`` and ``"ad-em"``,
        run without their stopping rule, which looks at the true factors. The
        ``-30`` methods are their scripts' runs: at most 30 rounds, stopped when
        the factor MSE against the truth changes by less than 1e-6 relative.

    Returns
    -------
    dict
        For each method: ``mse_theirs`` (their ``getMSE_nomre``), ``mse`` (ours on
        their estimate), ``seconds`` (their timer), ``iterations``, and ``weights`` /
        ``factors`` (their estimate).
    """
    checkout = Path(checkout).expanduser().resolve()
    n_components = truth.weights.size
    n_cat = [a.shape[0] for a in truth.factors]
    with tempfile.TemporaryDirectory(prefix="cnmf-authors-") as tmp:
        work = Path(tmp)
        functions = _patched_functions(checkout, work)
        (work / "run_cnmf_authors.m").write_text(_DRIVER)
        data = np.asarray(codes, dtype=np.int64) + 1
        np.savetxt(work / "data.csv", data, fmt="%d", delimiter=",")
        width = max(n_components, len(n_cat))
        table = np.zeros((2 + sum(n_cat), width))
        table[0, :n_components] = truth.weights
        table[1, : len(n_cat)] = n_cat
        table[2:, :n_components] = np.vstack(truth.factors)
        np.savetxt(work / "truth.csv", table, delimiter=",", fmt="%.17g")
        cells = "{" + ",".join(f"'{m}'" for m in methods) + "}"
        call = (
            f"addpath('{work}'); addpath('{functions}'); "
            f"addpath('{functions / 'tensorlab'}'); "
            + (f"addpath('{work / 'functions_mle'}'); " if "ad-em" in methods else "")
            + f"run_cnmf_authors('{work / 'data.csv'}', '{work / 'truth.csv'}', "
            f"'{work}', {n_components}, {split}, {cells}, {opt_sweeps}, {ctd_iter}, "
            f"[{ctd_rho[0]:g} {ctd_rho[1]:g}], {int(bool(ctd_uniform_l0))}, "
            f"{int(em_rounds)})"
        )
        start = time.perf_counter()
        proc = run_octave(call, work, timeout)
        summary = work / "summary.csv"
        if not summary.exists() or not summary.read_text().strip():
            raise RuntimeError(
                f"the authors' code failed under Octave (exit {proc.returncode}):\n"
                + proc.stderr[-2000:]
            )
        out = {}
        for line in summary.read_text().splitlines():
            name, mse, seconds, iters = line.split(",")
            est = np.loadtxt(work / f"{name}.csv", delimiter=",", ndmin=2)
            weights = est[0, :n_components]
            stacked = est[1:, :n_components]
            offsets = np.concatenate([[0], np.cumsum(n_cat)])
            factors = [stacked[offsets[n] : offsets[n + 1]] for n in range(len(n_cat))]
            finite = np.all(np.isfinite(stacked)) and np.all(np.isfinite(weights))
            # their CTD projects the columns onto {x >= 0, sum(x) <= 1} (SimplexProj.m),
            # so its columns need not be PMFs: the smallest column sum, and the MSE of
            # the estimate with every column (and the weights) rescaled to sum to one
            col_min = float(min(a.sum(axis=0).min() for a in factors)) if finite else 1.0
            unit = [a / np.where(a.sum(axis=0) > 0, a.sum(axis=0), 1.0) for a in factors]
            w_unit = weights / weights.sum() if finite and weights.sum() > 0 else weights
            out[name] = {
                "column_sum_min": col_min,
                "mse_unit_columns": factor_mse(w_unit, unit, truth.weights, truth.factors)
                if finite
                else float("nan"),
                "mse_theirs": float(mse),
                # their code can return NaN factors (their tables average with nanmean)
                "mse": factor_mse(weights, factors, truth.weights, truth.factors)
                if finite
                else float("nan"),
                "seconds": float(seconds),
                "iterations": int(iters),
                "weights": weights,
                "factors": factors,
            }
        missing = [m for m in methods if m not in out]
        if missing:  # their code stopped part-way: say where
            out["_error"] = f"no estimate of {missing}: " + proc.stderr[-1500:]
        out["_wall"] = time.perf_counter() - start
    return out
