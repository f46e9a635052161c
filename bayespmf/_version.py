"""The package version, in a module of its own so that any module can read it.

Importing :mod:`bayespmf` itself for ``__version__`` (as the writers of saved files
need) would make those modules import the package that imports them.
"""

__all__ = ["__version__"]

#: Kept equal to ``version`` in ``pyproject.toml``.
__version__ = "0.1.0"
