"""Run the CNMF authors' public MATLAB code under GNU Octave on our simulated data.

Ibrahim & Fu publish their code at github.com/shahanaibrahimosu/joint-probability-
estimation. It is not part of bayespmf and nothing of it is copied here: the user
points ``--authors-code`` at their own checkout of the folder
``jointprobability_code_tsp/JointProbability_synthetic``. This module writes the data
of one trial to CSV files, copies the checkout's ``functions`` folder to a temporary
directory with one Octave compatibility edit (Octave 7 has no ``sum(x, "all")``; it
becomes ``sum(x(:))``), writes a small driver that calls their functions exactly as
their experiment scripts do (``main_synthetic1.m`` for Tables 4-5,
``main_synthetic2_seperability.m`` for Tables 1-3), runs it, and reads back each
method's estimate. The factor MSE is then computed by bayespmf's
:func:`~bayespmf.metrics.factor_mse` on their estimate, next to the MSE their own
``getMSE_nomre.m`` printed, so the two metric implementations are checked against each
other on every run.

Their protocol, as the scripts run it: CNMF-SPA (``SingleSPA``, M = 3, its projected
gradient started from ``rand``); CNMF-OPT (``N_CTF_AO_KL``) from the CNMF-SPA factors
floored at 1e-6 and the *true* prior, at most 200 outer sweeps (500 in the Table 1-3
script) of up to 200 mirror-descent steps per block, outer tolerance 1e-6; the EMs
(``run_EM_mod``) at most 30 iterations, stopped when the factor MSE against the *true*
factors changes by less than 1e-6 relative; RAND-EM from ``gen_PMF_factors``.
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
AUTHORS_METHODS = ("cnmf-spa", "cnmf-opt", "cnmf-spa-em", "em")

_DRIVER = r"""
function run_cnmf_authors(datafile, truthfile, outdir, F, M, methods, opt_sweeps)
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
if any(strcmp(methods, 'cnmf-spa-em')) || any(strcmp(methods, 'em'))
  Z = cell(N, 1);
  for n = 1:N
    r = find(dataset(:, n) > 0);
    Z{n} = full(sparse(r, dataset(r, n), 1, n_items, I(n)));
  end
  o = {}; o.Nround = 30; o.A_true = A_true; o.l_true = l_true; o.tol = 1e-6;
  if any(strcmp(methods, 'cnmf-spa-em'))
    A0 = A_est;
    for i = 1:N, G = max(A0{i}, eps); A0{i} = G * diag(1 ./ sum(G, 1)); end
    a = tic; [Ae, le, ts] = run_EM_mod(A0, l_est, Z, o); t = toc(a);
    save_est(outdir, 'cnmf-spa-em', Ae, le);
    fprintf(fid, 'cnmf-spa-em,%.12g,%.6g,%d\n', getMSE_nomre(Ae, le, A_true, l_true), ...
            t, numel(ts));
  end
  if any(strcmp(methods, 'em'))
    [A0, l0] = gen_PMF_factors(I, F);
    a = tic; [Ae, le, ts] = run_EM_mod(A0, l0, Z, o); t = toc(a);
    save_est(outdir, 'em', Ae, le);
    fprintf(fid, 'em,%.12g,%.6g,%d\n', getMSE_nomre(Ae, le, A_true, l_true), t, numel(ts));
  end
end
fclose(fid);
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
    """Copy ``functions`` (and its tensorlab) with the Octave edit; return the copy."""
    src = checkout / "functions"
    if not (src / "SingleSPA.m").exists():
        raise FileNotFoundError(
            f"--authors-code {checkout}: no functions/SingleSPA.m there; point it at "
            "jointprobability_code_tsp/JointProbability_synthetic of a checkout of "
            "shahanaibrahimosu/joint-probability-estimation."
        )
    dst = workdir / "functions"
    shutil.copytree(src, dst)
    pattern = re.compile(r'sum\(([A-Za-z_{}0-9]+),\s*"all"\)')
    for path in dst.glob("*.m"):
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

    Returns
    -------
    dict
        For each method: ``mse_theirs`` (their ``getMSE_nomre``), ``mse`` (ours on
        their estimate), ``seconds`` (their timer), ``iterations``, and ``weights`` /
        ``factors`` (their estimate).
    """
    checkout = Path(checkout).expanduser().resolve()
    rank = truth.weights.size
    n_cat = [a.shape[0] for a in truth.factors]
    with tempfile.TemporaryDirectory(prefix="cnmf-authors-") as tmp:
        work = Path(tmp)
        functions = _patched_functions(checkout, work)
        (work / "run_cnmf_authors.m").write_text(_DRIVER)
        data = np.asarray(codes, dtype=np.int64) + 1
        np.savetxt(work / "data.csv", data, fmt="%d", delimiter=",")
        width = max(rank, len(n_cat))
        table = np.zeros((2 + sum(n_cat), width))
        table[0, :rank] = truth.weights
        table[1, : len(n_cat)] = n_cat
        table[2:, :rank] = np.vstack(truth.factors)
        np.savetxt(work / "truth.csv", table, delimiter=",", fmt="%.17g")
        cells = "{" + ",".join(f"'{m}'" for m in methods) + "}"
        call = (
            f"addpath('{work}'); addpath('{functions}'); "
            f"addpath('{functions / 'tensorlab'}'); "
            f"run_cnmf_authors('{work / 'data.csv'}', '{work / 'truth.csv'}', "
            f"'{work}', {rank}, {split}, {cells}, {opt_sweeps})"
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
            weights = est[0, :rank]
            stacked = est[1:, :rank]
            offsets = np.concatenate([[0], np.cumsum(n_cat)])
            factors = [stacked[offsets[n] : offsets[n + 1]] for n in range(len(n_cat))]
            finite = np.all(np.isfinite(stacked)) and np.all(np.isfinite(weights))
            out[name] = {
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
        out["_wall"] = time.perf_counter() - start
    return out
