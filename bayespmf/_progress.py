"""A progress bar that does nothing when disabled.

Algorithm code calls ``bar.update()`` / ``bar.set_postfix(...)`` unconditionally and
never branches on ``progressbar`` (STYLE.md, Tooling).
"""

from __future__ import annotations

__all__ = ["progress_bar"]


class _NullBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, *args, **kwargs) -> None:
        pass

    def set_description(self, *args, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def progress_bar(total: int | None, desc: str, enabled: bool = True):
    """Return a tqdm bar (``enabled`` and on a terminal) or a silent stand-in.

    Examples
    --------
    >>> with progress_bar(10, "EM", enabled=False) as bar:
    ...     bar.update()
    """
    if not enabled:
        return _NullBar()
    from tqdm.auto import tqdm

    # disable=None: silent when the output is not a terminal (logs, CI, pipes)
    return tqdm(
        total=total,
        desc=desc,
        leave=False,
        dynamic_ncols=True,
        mininterval=0.2,
        disable=None,
    )
