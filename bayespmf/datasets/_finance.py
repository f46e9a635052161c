"""A shipped panel of daily stock returns (20 S&P 500 constituents, 1990-2022).

The prices are the ``sp500_dataset.csv`` that scikit-learn-contrib ``skfolio`` ships
inside its wheel (BSD 3-Clause; its licence is shipped beside the file, see
``data/ATTRIBUTION.md``): daily adjusted closing prices of 20 constituents of the
S&P 500 from 1990-01-02 to 2022-12-28 (8,313 trading days, no gaps). The Dirichlet
simplex nest paper (Yurochkin et al. 2019, Sec. 5.2) analyses 55 companies' daily
price variations; this is the shippable stand-in.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from bayespmf._validation import DataValidationError, check_choice, check_int
from bayespmf.datasets._registry import get_info, read_bytes

__all__ = ["SP500_KINDS", "load_sp500"]

#: What :func:`load_sp500` can return.
SP500_KINDS = ("returns", "log_returns", "prices")

_SP500_FILE = "sp500/sp500_dataset.csv.gz"


def load_sp500(kind: str = "returns", last_days: int | None = None) -> pd.DataFrame:
    r"""Daily returns (or prices) of 20 S&P 500 stocks, 1990-01-02 to 2022-12-28.

    Parameters
    ----------
    kind : {"returns", "log_returns", "prices"}, default "returns"
        Simple daily returns :math:`p_t / p_{t-1} - 1`, log returns
        :math:`\log(p_t / p_{t-1})` (one row fewer than the prices: the first day has
        none), or the adjusted closing prices themselves.
    last_days : int, optional
        Keep only the last ``last_days`` rows (e.g. 3400, the length of the panel in
        the paper's Sec. 5.2).

    Returns
    -------
    pandas.DataFrame
        Rows are trading days (a ``DatetimeIndex`` named ``Date``), columns the 20
        tickers (AAPL, AMD, BAC, BBY, CVX, GE, HD, JNJ, JPM, KO, LLY, MRK, MSFT, PEP,
        PFE, PG, RRC, UNH, WMT, XOM); float64, no missing values.

    Raises
    ------
    DataValidationError
        An unknown ``kind`` or a ``last_days`` outside ``1 .. n_rows``.

    Notes
    -----
    Source: ``skfolio.datasets.load_sp500_dataset`` (skfolio 1.12.2, BSD 3-Clause,
    copyright the skfolio developers), shipped unchanged with its sha256 checked on
    every read. skfolio describes it as a stale data set for testing and examples, not
    for investment or trading.

    Examples
    --------
    >>> R = load_sp500()
    >>> R.shape, R.index[0].date().isoformat()
    ((8312, 20), '1990-01-03')
    >>> load_sp500("prices", last_days=3400).shape
    (3400, 20)
    """
    kind = check_choice(kind, "kind", SP500_KINDS, owner="load_sp500")
    info = get_info("sp500")
    raw = read_bytes(_SP500_FILE, info.files[_SP500_FILE])
    prices = pd.read_csv(io.BytesIO(raw), index_col="Date", parse_dates=["Date"])
    prices = prices.astype(np.float64)
    if kind == "prices":
        out = prices
    else:
        ratio = prices.to_numpy()[1:] / prices.to_numpy()[:-1]
        values = np.log(ratio) if kind == "log_returns" else ratio - 1.0
        out = pd.DataFrame(values, index=prices.index[1:], columns=prices.columns)
    if last_days is not None:
        last_days = check_int(last_days, "last_days", owner="load_sp500", low=1)
        if last_days > len(out):
            raise DataValidationError(
                f"The 'last_days' parameter of load_sp500 must be <= {len(out)} (the "
                f"rows of kind={kind!r}); got {last_days}. Lower it or drop it."
            )
        out = out.iloc[-last_days:]
    return out.copy()
