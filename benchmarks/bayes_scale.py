"""The posterior at scale (issue 25): the Gibbs step side by side with NUTS, per row.

Rows (``--rows``, default all four):

* ``car``: UCI Car, rank 4, 2 chains, one ``LatentClassPMF`` fit per seed as the start
  of every sampler; bulk ESS per second of Gibbs (500 + 2000 draws) and of NUTS, PyMC's
  and numpyro's (500 + 500). Goal: Gibbs >= 10x PyMC's NUTS on every seed.
* ``weak``: the weakly separated simulated case of issue 13 (S=2000, N=15, I=10, F=5,
  half missing, ``make_latent_class(..., random_state=t)`` for t in ``--weak-truths``,
  default 0, 1, 6), rank 5: the user's one call with the defaults,
  ``sample(latent_class_model(data, 5), method="gibbs", random_seed=t)`` (start
  included, 4 chains, sampled to the default target; ``--weak-max-time`` caps it
  below sample's default 600 s). Goal: aligned r-hat <= 1.01 and bulk ESS >= 400 in
  <= 60 s on 2 cores, on every truth. ``--weak-fixed`` adds the runs of fixed length
  from one ``LatentClassPMF(5, random_state=0)`` fit (``--weak-sweeps``,
  ``--weak-init optima``, ``--weak-nuts``); ``--weak-target-ess 400`` one run per
  truth from that fit with ``target_ess`` and 2 chains.
* ``scale``: S = 1e5 and 1e6 rows (N=20, I=10, F=5, half missing): the same default
  call (``log_likelihood=False``; ``--scale-max-time`` caps it, ``--quick`` only;
  ``--scale-truth`` another simulated truth, default 0).
  Goal at 1e6: r-hat <= 1.01, ESS >= 400, <= 10 min on 2 cores, memory beyond the
  data <= 1 GB. NUTS is not run (one gradient at 1e5 costs about 25 ms and a draw
  15-110 of them: hours).
* ``dask``: 1e7 rows through ``run_dask_row`` of ``benchmarks/_scale_dask.py`` (flat
  memory); skipped, with the reason printed, where that module is absent.

Per run: wall seconds of ``sample`` (for a default call the whole call, start
included, and a line with the start's seconds, the sampler's and the total, the load
average), ``fit s`` the point estimate, worst aligned r-hat and
smallest bulk ESS over every entry of the weights and factors, ESS per second and,
for the ``scale`` rows, the peak memory of the process and its chain processes
(proportional set size, sampled every 0.2 s) minus the bytes of the data's codes, and
minus what the process held before ``sample`` ("growth"). Run::

    python benchmarks/bayes_scale.py                       # every row (long)
    python benchmarks/bayes_scale.py --rows car weak --nuts pymc
    python benchmarks/bayes_scale.py --rows scale --sizes 1000000
    python benchmarks/bayes_scale.py --quick               # smoke run, < 2 min
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import threading
import time
import warnings

import numpy as np
from _common import parse_args_quick
from bayes_gibbs import run_sample, summary

from bayespmf.datasets import load_car, make_latent_class
from bayespmf.estimators import LatentClassPMF
from bayespmf.models import latent_class_model, sample

ROWS = ("car", "weak", "scale", "dask")
HEADER = (
    f"{'row':<6} {'case':<16} {'sampler':<12} {'chains x draws':>15} {'fit s':>6} "
    f"{'s':>7} {'r-hat':>6} {'bulk ESS':>9} {'ESS/s':>8} {'MB>data':>8} {'growth':>7}"
)


class PeakMemory:
    """Peak memory of this process and its children while the block runs (MB).

    Proportional set size (shared pages split between the processes that share them)
    where psutil can read it, resident set size otherwise; sampled every 0.2 s.
    """

    def __init__(self):
        self.peak = self.before = 0.0
        self._stop = threading.Event()

    @staticmethod
    def now() -> float:
        try:
            import psutil
        except ImportError:  # only this process's own high-water mark
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        me = psutil.Process(os.getpid())
        total = 0.0
        for p in [me, *me.children(recursive=True)]:
            try:
                info = p.memory_full_info()
                total += getattr(info, "pss", info.rss)
            except (psutil.Error, OSError):
                pass
        return total / 2**20

    def _poll(self):
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, self.now())

    def __enter__(self):
        self.before = self.peak = self.now()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.now())


def show(row, case, sampler, chains, tune, draws, fit_s, s, mem=None, data_mb=0.0):
    beyond = growth = ""
    if mem is not None:
        beyond, growth = f"{mem.peak - data_mb:8.0f}", f"{mem.peak - mem.before:7.0f}"
    print(
        f"{row:<6} {case:<16} {sampler:<12} {f'{chains}x({tune}+{draws})':>15} "
        f"{fit_s:6.1f} {s['seconds']:7.1f} {s['r_hat']:6.3f} {s['ess_bulk']:9.0f} "
        f"{s['ess_per_s']:8.1f} {beyond:>8} {growth:>7}",
        flush=True,
    )


def n_init(value):
    """``n_init`` for LatentClassPMF: the estimator's default where ``value`` is 0."""
    return {"n_init": value} if value else {}


def nuts_samplers(requested):
    """The requested NUTS backends that are installed (numpyro needs JAX)."""
    out = []
    for name in requested:
        if name == "pymc" or importlib.util.find_spec(name) is not None:
            out.append(name)
        else:
            print(f"# NUTS {name}: not installed, not run")
    return out


def run_one(args, row, model, start, sampler, *, seed, k=None):
    """Gibbs (``k`` sweeps per draw, None: the default) or one NUTS backend, 2 chains,
    with the row's draws and tune; the summary (with ``draws``, ``tune``), a label."""
    gibbs = sampler == "gibbs"
    kind = "gibbs" if gibbs else "nuts"
    draws, tune = getattr(args, f"{row}_{kind}_draws"), getattr(args, f"{row}_{kind}_tune")
    s, _ = run_sample(
        model,
        start,
        kind,
        nuts_sampler="pymc" if gibbs else sampler,
        draws=draws,
        tune=tune,
        chains=2,
        seed=seed,
        **({"n_sweeps": k} if gibbs and k else {}),
    )
    label = (f"gibbs x{k}" if k else "gibbs") if gibbs else f"nuts-{sampler}"
    return {**s, "draws": draws, "tune": tune}, label


def row_car(args):
    data = load_car().data
    model = latent_class_model(data, 4)
    for seed in args.car_seeds:
        t0 = time.perf_counter()
        point = LatentClassPMF(4, random_state=seed, **n_init(args.car_n_init)).fit(data)
        fit_s = time.perf_counter() - t0
        case = f"Car F=4 seed {seed}"
        out = {}
        for sampler in ["gibbs", *nuts_samplers(args.nuts)]:
            s, label = run_one(args, "car", model, point, sampler, seed=seed)
            out[label] = s["ess_per_s"]
            show("car", case, label, 2, s["tune"], s["draws"], fit_s, s)
        for label in out:
            if label != "gibbs":
                ratio = out["gibbs"] / out[label]
                print(f"{'car':<6} {case:<16} gibbs / {label}: {ratio:.1f}x (goal >= 10x)")


def timed_sample(model, seed, **kw):
    """``sample(model, method="gibbs", random_seed=seed, **kw)``, quiet, timed.

    No progress bar and no log-likelihood group; warnings off. Returns the summary
    (r-hat and ESS of every entry of the result, ``seconds`` the call's wall time,
    ``load`` the larger 1-minute load average of its start and end), the result and
    the peak memory.
    """
    load = os.getloadavg()[0]
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = sample(
                model,
                method="gibbs",
                random_seed=seed,
                progressbar=False,
                log_likelihood=False,
                **kw,
            )
        wall = time.perf_counter() - t0
    s = summary(idata)
    s["seconds"], s["ess_per_s"] = wall, s["ess_bulk"] / wall
    s["load"] = max(load, os.getloadavg()[0])
    return s, idata, mem


def default_call(model, seed, max_time=None):
    """The user's one call with the defaults: ``sample(model, method="gibbs")``.

    Start included (``init="auto"``), 4 chains, sampled to the default target
    (``target_ess`` 400, ``target_rhat`` 1.01, ``max_time`` 600 s unless
    ``max_time`` is given: only ``--quick`` does). Returns the summary, the
    posterior attrs and the peak memory (:func:`timed_sample`).
    """
    s, idata, mem = timed_sample(
        model, seed, **({} if max_time is None else {"max_time": max_time})
    )
    return s, idata.posterior.attrs, mem


def show_default(row, case, s, attrs, mem, data_mb):
    """One line of a default call: start, sampling and total seconds, r-hat, ESS, MB."""
    draws = sum(attrs.get("target_batches", [0]))
    show(
        row,
        case,
        "gibbs default",
        4,
        attrs["tuning_steps"],
        draws,
        attrs["start_time"],
        s,
        mem,
        data_mb,
    )
    met = s["r_hat"] <= 1.01 and s["ess_bulk"] >= 400
    start = {k: attrs[k] for k in attrs if k.startswith("start_")}
    print(
        f"{row:<6} {case:<16} start {attrs['start_time']:.1f} s, sampler "
        f"{attrs['sampling_time']:.1f} s, total {s['seconds']:.1f} s; r-hat "
        f"{s['r_hat']:.4f}, ESS {s['ess_bulk']:.0f} (target "
        f"{'reached' if attrs.get('target_reached') else 'NOT reached'}: "
        f"{'yes' if met else 'no'}); batches {list(attrs.get('target_batches', []))}; "
        f"peak {mem.peak:.0f} MB, before {mem.before:.0f} MB, data {data_mb:.0f} MB; "
        f"load {s['load']:.2f}; {start}",
        flush=True,
    )


def weak_data(args, truth_seed):
    data, _ = make_latent_class(
        args.weak_rows,
        10,
        5,
        0.5,
        n_variables=15,
        drop_empty_rows=True,
        random_state=truth_seed,
    )
    return data


def row_weak(args):
    for truth_seed in args.weak_truths:
        data = weak_data(args, truth_seed)
        model = latent_class_model(data, 5)
        case = f"S={args.weak_rows} truth {truth_seed}"
        data_mb = np.asarray(data.codes).nbytes / 2**20
        s, attrs, mem = default_call(model, truth_seed, args.weak_max_time or None)
        show_default("weak", case, s, attrs, mem, data_mb)
        met = s["r_hat"] <= 1.01 and s["ess_bulk"] >= 400 and s["seconds"] <= 60
        print(f"{'weak':<6} {case:<16} goal (<= 60 s) met: {'yes' if met else 'no'}")
        if not (args.weak_fixed or args.weak_target_ess):
            continue
        t0 = time.perf_counter()
        point = LatentClassPMF(5, random_state=0, **n_init(args.weak_n_init)).fit(data)
        fit_s = time.perf_counter() - t0
        if args.weak_fixed:
            runs = [("gibbs", k, init) for init in args.weak_init for k in args.weak_sweeps]
            runs += [(name, None, "auto") for name in nuts_samplers(args.weak_nuts)]
            for sampler, k, init in runs:
                start = ("optima", point) if init == "optima" else point
                s, label = run_one(
                    args, "weak", model, start, sampler, seed=truth_seed, k=k
                )
                if init == "optima":
                    label += " opt"
                show("weak", case, label, 2, s["tune"], s["draws"], fit_s, s)
        if args.weak_target_ess:
            weak_target(args, model, point, case, fit_s, truth_seed)


def weak_target(args, model, point, case, fit_s, seed):
    """One ``sample(..., target_ess=...)`` run of a weak truth (see the docstring)."""
    s, idata, _ = timed_sample(
        model,
        seed,
        init=point,
        target_ess=args.weak_target_ess,
        max_time=args.weak_target_max_time,
        chains=2,
    )
    wall = s["seconds"]
    attrs = idata.posterior.attrs
    label = f"gibbs->{args.weak_target_ess:g}"
    draws = idata.posterior.sizes["draw"]
    show("weak", case, label, 2, attrs["tuning_steps"], draws, fit_s, s)
    print(
        f"{'weak':<6} {case:<16} {label}: target "
        f"{'reached' if attrs['target_reached'] else 'NOT reached'} (max_time "
        f"{args.weak_target_max_time:g} s); batches {list(attrs['target_batches'])}, "
        f"their seconds {[round(v, 1) for v in attrs['target_batch_seconds']]} (checks "
        f"{[round(v, 1) for v in attrs['target_check_seconds']]}); sampler "
        f"{attrs['sampling_time']:.1f} s of {wall:.1f} s",
        flush=True,
    )


def row_scale(args):
    for n_rows in args.sizes:
        data, _ = make_latent_class(
            n_rows,
            10,
            5,
            0.5,
            n_variables=20,
            drop_empty_rows=True,
            random_state=args.scale_truth,
        )
        data_mb = np.asarray(data.codes).nbytes / 2**20
        model = latent_class_model(data, 5)
        s, attrs, mem = default_call(model, args.scale_truth, args.scale_max_time or None)
        show_default("scale", f"S={n_rows:.0e}", s, attrs, mem, data_mb)
        met = s["r_hat"] <= 1.01 and s["ess_bulk"] >= 400 and s["seconds"] <= 600
        print(
            f"{'scale':<6} S={n_rows:.0e}: goal (<= 600 s, <= 1024 MB beyond the data) "
            f"met: {'yes' if met and mem.peak - data_mb <= 1024 else 'no'}; NUTS not "
            "run (hours at 1e5)",
            flush=True,
        )


def row_dask(args):
    try:
        from _scale_dask import run_dask_row
    except ImportError as err:
        print(f"{'dask':<6} skipped: benchmarks/_scale_dask.py run_dask_row absent ({err})")
        return
    r = run_dask_row(
        args.dask_rows, chains=4, draws=args.dask_draws, seed=0, quick=args.quick
    )
    print(
        f"{'dask':<6} {f'S={args.dask_rows:.0e}':<16} {'gibbs-dask':<12} "
        f"{f'4x{args.dask_draws}':>15} {'':>6} {r['seconds']:7.1f} "
        f"{r['rhat_max']:6.3f} {r['ess_bulk_min']:9.0f} "
        f"{r['ess_bulk_min'] / r['seconds']:8.1f} {r['peak_rss_mb']:8.0f} (peak RSS MB)",
        flush=True,
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    ap.add_argument("--nuts", nargs="*", default=["pymc", "numpyro"], help="car row")
    ap.add_argument("--car-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--car-gibbs-draws", type=int, default=2000)
    ap.add_argument("--car-gibbs-tune", type=int, default=500)
    ap.add_argument("--car-nuts-draws", type=int, default=500)
    ap.add_argument("--car-nuts-tune", type=int, default=500)
    ap.add_argument("--car-n-init", type=int, default=0, help="0: the fit's default")
    ap.add_argument("--weak-n-init", type=int, default=0, help="0: the fit's default")
    ap.add_argument("--weak-truths", type=int, nargs="+", default=[0, 1, 6])
    ap.add_argument("--weak-rows", type=int, default=2000)
    ap.add_argument("--weak-nuts", nargs="*", default=["numpyro"])
    ap.add_argument("--weak-init", nargs="+", choices=["auto", "optima"], default=["auto"])
    ap.add_argument(
        "--weak-fixed",
        action="store_true",
        help="also the runs of fixed length from one LatentClassPMF(5, random_state=0) "
        "fit (--weak-sweeps, --weak-init, --weak-nuts)",
    )
    ap.add_argument(
        "--weak-sweeps", type=int, nargs="+", default=[0], help="0: the default"
    )
    ap.add_argument(
        "--weak-target-ess",
        type=float,
        default=0,
        help="also sample each weak truth from that fit to this bulk ESS, 2 chains",
    )
    ap.add_argument(
        "--weak-target-max-time", type=float, default=300, help="its max_time (s)"
    )
    ap.add_argument(
        "--weak-max-time",
        type=float,
        default=0,
        help="max_time of the default call (0: sample's default)",
    )
    ap.add_argument("--weak-gibbs-draws", type=int, default=2000)
    ap.add_argument("--weak-gibbs-tune", type=int, default=500)
    ap.add_argument("--weak-nuts-draws", type=int, default=2000)
    ap.add_argument("--weak-nuts-tune", type=int, default=1000)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument(
        "--scale-truth",
        type=int,
        default=0,
        help="random_state of the scale rows' simulated truth (and the call's seed)",
    )
    ap.add_argument(
        "--scale-max-time",
        type=float,
        default=0,
        help="max_time of the default call (0: sample's default)",
    )
    ap.add_argument("--dask-rows", type=int, default=10_000_000)
    ap.add_argument("--dask-draws", type=int, default=1000)
    args = parse_args_quick(
        ap,
        argv,
        car_seeds=[0],
        car_n_init=10,
        weak_n_init=10,
        car_gibbs_draws=150,
        car_gibbs_tune=50,
        car_nuts_draws=30,
        car_nuts_tune=30,
        nuts=["pymc"],
        weak_truths=[0],
        weak_rows=500,
        weak_nuts=[],
        weak_gibbs_draws=150,
        weak_gibbs_tune=50,
        weak_max_time=5,
        sizes=[5_000],
        scale_max_time=5,
        dask_rows=20_000,
        dask_draws=50,
    )
    print(
        "seconds: sample's sampling_time (compilation included, point estimate not: "
        "'fit s'); r-hat, bulk ESS aligned, worst over every entry; MB>data: peak "
        "memory minus the data's codes; growth: peak minus the memory before sample"
    )
    print(HEADER)
    for row in args.rows:
        {"car": row_car, "weak": row_weak, "scale": row_scale, "dask": row_dask}[row](args)


if __name__ == "__main__":
    main()
