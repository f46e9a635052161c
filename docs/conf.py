"""Sphinx configuration of the bayespmf documentation site.

Modelled on PyMC's ``docs/source/conf.py``: the PyData theme, numpydoc for the API
reference (generated from the docstrings by autosummary), MyST for the pages and
MyST-NB for the example notebooks. Build it with warnings as errors, as CI does::

    pip install -e ".[docs]"
    sphinx-build -W --keep-going -b html docs docs/_build/html

The API pages (``docs/api/*.rst``) are written here, at configuration time, from each
public package's ``__all__``, so that every public name is documented and a name
added, renamed or removed in the code changes the reference without an edit here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))

import bayespmf  # noqa: E402

# -- Project ----------------------------------------------------------------------------

project = "bayespmf"
author = "bayespmf developers"
copyright = "bayespmf developers"
version = release = bayespmf.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_nb",
    "sphinx_copybutton",
]

exclude_patterns = ["_build", "**.ipynb_checkpoints"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
templates_path = ["_templates"]

# -- HTML -------------------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"bayespmf {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
}
html_static_path: list[str] = []
html_show_sourcelink = False

# -- API reference ----------------------------------------------------------------------

#: The public packages the API reference covers, in the order of its pages. A name
#: exported by several of them (``bayespmf.LatentClassPMF`` is
#: ``bayespmf.estimators.LatentClassPMF``) gets one page, under the first package
#: below that exports it; the others link to it.
API_MODULES = [
    ("bayespmf.estimators", "Estimators (scikit-learn)"),
    ("bayespmf.fit", "Fit functions"),
    ("bayespmf.models", "PyMC models and posteriors"),
    ("bayespmf.marginals", "Marginals"),
    ("bayespmf.datasets", "Data sets and simulators"),
    ("bayespmf.metrics", "Metrics"),
    ("bayespmf.plots", "Plots"),
    ("bayespmf.dask", "Dask (larger than memory)"),
    ("bayespmf.io", "Saving and loading"),
    ("bayespmf", "The top-level namespace"),
]

autosummary_generate = True
autosummary_ignore_module_all = False
# the class pages (_templates/autosummary/class.rst) show inherited members too:
# LatentClassPMF's predict_proba, score, bic, ... live in private mixins; those of
# scikit-learn's bases and of builtins are skipped (_skip_member)
autodoc_default_options = {"members": True}
autodoc_typehints = "none"  # numpydoc's Parameters sections state the types
autodoc_member_order = "bysource"

numpydoc_show_class_members = False  # autodoc lists the members on the class page
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False
# numpydoc's docstring validation stays off (numpydoc_validation_checks empty): the
# docstrings are checked by ruff's pydocstyle rules (pyproject.toml), and the build
# fails on what Sphinx itself cannot render.
numpydoc_validation_checks: set[str] = set()

intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable/", None),
    "scipy": ("https://docs.scipy.org/doc/scipy/", None),
    "pandas": ("https://pandas.pydata.org/docs/", None),
    "sklearn": ("https://scikit-learn.org/stable/", None),
    "pymc": ("https://www.pymc.io/projects/docs/en/stable/", None),
    "arviz": ("https://python.arviz.org/en/stable/", None),
    "xarray": ("https://docs.xarray.dev/en/stable/", None),
    "dask": ("https://docs.dask.org/en/stable/", None),
}
# CI and the test machines have no network: intersphinx is used only when asked for
# (BAYESPMF_DOCS_INTERSPHINX=1), so an offline build neither waits nor warns.
if os.environ.get("BAYESPMF_DOCS_INTERSPHINX") != "1":
    intersphinx_mapping = {}


def _kind(obj) -> str:
    if isinstance(obj, type) and issubclass(obj, Warning):
        return "Warnings"
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return "Exceptions"
    if isinstance(obj, type):
        return "Classes"
    if callable(obj):
        return "Functions"
    return "Constants"


def _write_if_changed(path: Path, text: str) -> None:
    # an unchanged file keeps its time stamp, so an incremental build stays incremental
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def write_api_pages() -> None:
    """Write ``api/index.rst`` and one page per public package from ``__all__``."""
    import importlib
    import inspect

    api = DOCS / "api"
    api.mkdir(exist_ok=True)
    home: dict[int, str] = {}  # id(object) -> the package whose page documents it
    modules = {name: importlib.import_module(name) for name, _ in API_MODULES}
    pages = []
    for name, title in API_MODULES:
        module = modules[name]
        groups: dict[str, list[str]] = {}
        links: list[str] = []
        for member in module.__all__:
            obj = getattr(module, member)
            if inspect.ismodule(obj):
                links.append(f"* :mod:`{obj.__name__}`")
                continue
            key = id(obj)
            if key in home and _kind(obj) != "Constants":
                links.append(f"* :obj:`{member} <{home[key]}.{member}>`")
                continue
            home.setdefault(key, name)
            groups.setdefault(_kind(obj), []).append(member)
        lines = [
            title,
            "=" * len(title),
            "",
            f".. automodule:: {name}",
            "   :no-members:",
            "",
            f".. currentmodule:: {name}",
        ]
        for kind in ("Classes", "Functions", "Exceptions", "Warnings", "Constants"):
            if kind not in groups:
                continue
            lines += [
                "",
                kind,
                "-" * len(kind),
                "",
                ".. autosummary::",
                "   :toctree: generated",
                "   :nosignatures:",
                "",
                *(f"   {member}" for member in groups[kind]),
            ]
        if links:
            also = "Also exported here"
            lines += ["", also, "-" * len(also), "", *links]
        _write_if_changed(api / f"{name}.rst", "\n".join(lines) + "\n")
        pages.append(name)
    index = [
        "API reference",
        "=============",
        "",
        "Every name in the ``__all__`` of the public packages, generated from the",
        "docstrings. The application layer (:mod:`bayespmf.apps`: tasks, baselines,",
        "specifications and the command line) is documented in :doc:`../cli`.",
        "",
        ".. toctree::",
        "   :maxdepth: 1",
        "",
        *(f"   {page}" for page in pages),
    ]
    _write_if_changed(api / "index.rst", "\n".join(index) + "\n")
    # autosummary never deletes the page of a name that left ``__all__``: a stale page
    # would fail the build (-W, "not included in any toctree"), so remove them here
    generated = api / "generated"
    if generated.is_dir():
        for page in generated.glob("*.rst"):
            package, _, member = page.stem.rpartition(".")
            module = modules.get(package)
            if module is None or member not in getattr(module, "__all__", ()):
                page.unlink()


write_api_pages()

# -- Notebooks (MyST-NB) ----------------------------------------------------------------

# The notebooks in notebooks/ are saved without outputs (tests/test_notebooks.py
# checks it and executes them), so the site executes them to show their outputs.
# "cache" (jupyter-cache) runs a notebook only when its code changed since the cached
# run; executing all six on every build would add several minutes on CI's 2 cores.
# CI points BAYESPMF_DOCS_NB_CACHE at a folder kept between runs; a build without it
# caches under docs/_build. BAYESPMF_DOCS_EXECUTE=off renders the notebooks without
# outputs (a quick check of everything else).
nb_execution_mode = os.environ.get("BAYESPMF_DOCS_EXECUTE", "cache")
# The kernels inherit this process's environment: a MPLBACKEND such as CI's "Agg" would
# keep the notebooks' figures off the pages. Without it ipykernel selects its inline
# backend, and this process, which draws nothing, matplotlib's default.
os.environ.pop("MPLBACKEND", None)
nb_execution_cache_path = os.environ.get(
    "BAYESPMF_DOCS_NB_CACHE", str(DOCS / "_build" / ".jupyter_cache")
)
nb_execution_timeout = 900  # seconds per cell: NUTS cells compile and sample
nb_execution_raise_on_error = True  # a failing notebook fails the build
nb_execution_show_tb = True
nb_merge_streams = True
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3


def _skip_member(app, what, name, obj, skip, options):
    # scikit-learn adds set_fit_request, set_score_request, ... to every estimator
    # whose fit or score takes sample_weight (metadata routing); they are
    # scikit-learn's, documented there, and their docstrings cite its glossary
    if name.startswith("set_") and name.endswith("_request"):
        return True
    # members inherited from scikit-learn (get_params, set_output, ...) or builtins
    # (tuple.count, Exception.with_traceback): documented where they come from
    target = getattr(obj, "fget", None) or getattr(obj, "__func__", None) or obj
    if callable(target) or isinstance(obj, property):
        module = getattr(target, "__module__", None) or ""
        if not module.startswith("bayespmf"):
            return True
    return skip


def _attribute_comment(modname: str, attr: str) -> list[str]:
    """The ``#:`` comment above ``attr = ...`` in ``modname`` or one of its modules."""
    import importlib
    import pkgutil

    from sphinx.pycode import ModuleAnalyzer

    names = [modname]
    module = importlib.import_module(modname)
    if hasattr(module, "__path__"):
        names += [m.name for m in pkgutil.walk_packages(module.__path__, modname + ".")]
    for name in names:
        try:
            docs = ModuleAnalyzer.for_module(name).find_attr_docs()
        except Exception:  # a module without source: nothing to read
            continue
        if ("", attr) in docs:
            return list(docs[("", attr)])
    return []


def _constant_docstring(app, what, name, obj, options, lines):
    # a constant re-exported by a package (bayespmf.fit.DEFAULT_N_INIT) has its "#:"
    # comment in the module that defines it; without this autodoc shows the docstring
    # of its type (int's)
    if what == "data":
        modname, _, attr = name.rpartition(".")
        lines[:] = _attribute_comment(modname, attr)


def setup(app):
    """Connect the hooks above."""
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("autodoc-process-docstring", _constant_docstring)
