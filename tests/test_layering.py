"""The package's import structure, checked by parsing the source (nothing is imported).

Rules (STYLE.md, "The layout we aim for"; issue 14):

(a) **No private name crosses a module boundary.** ``from bayespmf.x import _name`` and
    ``x._name`` (``x`` a bayespmf module bound by an import) are refused everywhere in
    ``bayespmf/``. A ``_``-prefixed *module* is private to the package that holds it:
    ``bayespmf._validation``, ``_progress``, ``_runtime`` and ``_version`` serve every
    module of ``bayespmf``; ``bayespmf.models._sampling`` serves ``bayespmf.models.*``
    only, ``bayespmf.marginals._common`` ``bayespmf.marginals.*`` only,
    ``bayespmf.datasets._registry`` ``bayespmf.datasets.*`` only. The names such a module
    exports carry no underscore (they are public to its package). Only code is parsed
    (not the examples in docstrings), and only ``bayespmf/``: tests may reach private
    helpers to test them.
(b) **No import cycle.** An edge goes to the module named in the import (``from
    bayespmf.fit import iterate`` -> ``bayespmf.fit``; ``from bayespmf import datasets``
    -> ``bayespmf.datasets``); the implicit import of parent packages is not an edge, as
    in import-linter. Two graphs are checked:

    * module-level imports (executed on import): no cycle between modules, no exception;
    * all imports, those inside function bodies included (they run on call): no cycle
      between modules, nor between the top-level units of the package (a subpackage or
      a top-level module, ``bayespmf/__init__.py`` being one). A function-level import
      that closes a loop only hides the circle until the function runs, so it counts.
(c) **Layers point one way**, whether the import is module-level or inside a function:
    ``kernels/`` imports nothing from ``fit/``, ``estimators/``, ``models/``, ``apps/``,
    ``plots/`` or the top-level ``bayespmf`` namespace (which re-exports estimators);
    ``fit/`` nothing from ``estimators/``, ``models/``, ``apps/``, ``plots/`` or the
    top-level namespace; nothing outside ``apps/`` imports ``apps/``.
(d) ``import bayespmf`` loads no module of ``bayespmf.apps`` (checked in a subprocess).

Known violations in files that are being rewritten elsewhere are listed in
``KNOWN_VIOLATIONS``; each is an ``xfail(strict=True)`` case, so fixing one makes the
suite fail until its entry is removed.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "bayespmf"
PACKAGE_DIR = Path(__file__).resolve().parents[1] / PACKAGE

#: The subpackages rule (c) names: ``bayespmf.<layer>`` and every module under it.
LAYERS = ("kernels", "fit", "estimators", "models", "apps", "plots")

#: What each layer may not import (module-level or in a function). "" is the top-level
#: ``bayespmf`` namespace (``bayespmf/__init__.py``), which imports the estimators.
FORBIDDEN = {
    "kernels": ("fit", "estimators", "models", "apps", "plots", ""),
    "fit": ("estimators", "models", "apps", "plots", ""),
}


#: (rule, importer, imported) -> the file to change and the fix. These are in files that
#: are being rewritten elsewhere; each is an xfail(strict=True) case, so fixing one fails
#: the suite until its entry is removed here.
KNOWN_VIOLATIONS: dict[tuple[str, str, str], str] = {}


@dataclass(frozen=True)
class Import:
    """One imported bayespmf module (and, for ``from M import n``, the names)."""

    importer: str
    target: str
    names: tuple[str, ...]
    lazy: bool
    lineno: int


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE_DIR.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


MODULES = _modules()


def _resolve_relative(importer: str, is_package: bool, level: int, module: str | None):
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


class _Visitor(ast.NodeVisitor):
    def __init__(self, importer: str, is_package: bool):
        self.importer = importer
        self.is_package = is_package
        self.depth = 0  # > 0 inside a function body
        self.imports: list[Import] = []
        self.aliases: dict[str, str] = {}  # local name -> bayespmf module
        self.attributes: list[tuple[str, str, int]] = []  # (module, attr, line)

    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def _add(self, target, names, node):
        self.imports.append(
            Import(self.importer, target, tuple(names), self.depth > 0, node.lineno)
        )

    def visit_Import(self, node):
        for alias in node.names:
            if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                self._add(alias.name, (), node)
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                else:
                    self.aliases[PACKAGE] = PACKAGE

    def visit_ImportFrom(self, node):
        module = node.module
        if node.level:
            module = _resolve_relative(self.importer, self.is_package, node.level, module)
        if module is None or not (module == PACKAGE or module.startswith(PACKAGE + ".")):
            return
        names = []
        for alias in node.names:
            sub = f"{module}.{alias.name}"
            if sub in MODULES:
                self._add(sub, (), node)
                self.aliases[alias.asname or alias.name] = sub
            else:
                names.append(alias.name)
        if names or not node.names:
            self._add(module, names, node)

    def visit_Attribute(self, node):
        chain = []
        value = node
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in self.aliases:
            module = self.aliases[value.id]
            for attr in reversed(chain):
                if f"{module}.{attr}" in MODULES:
                    module = f"{module}.{attr}"
                    continue
                self.attributes.append((module, attr, node.lineno))
                break
        self.generic_visit(node)


@dataclass
class _Parsed:
    imports: list[Import]
    attributes: dict[str, list[tuple[str, str, int]]]


def _parse() -> _Parsed:
    imports, attributes = [], {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        visitor = _Visitor(name, path.name == "__init__.py")
        visitor.visit(tree)
        imports += visitor.imports
        attributes[name] = visitor.attributes
    return _Parsed(imports, attributes)


PARSED = _parse()


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_module_visible(importer: str, target: str) -> bool:
    """Whether every ``_``-prefixed part of ``target`` is inside ``importer``'s reach."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if _is_private(part):
            owner = ".".join(parts[:i])  # the package that holds the private module
            if not (importer == owner or importer.startswith(owner + ".")):
                return False
    return True


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) == 1:
        return ""
    return parts[1] if parts[1] in LAYERS else None


def _in_layer(module: str, layer: str) -> bool:
    if layer == "":
        return module == PACKAGE
    return module == f"{PACKAGE}.{layer}" or module.startswith(f"{PACKAGE}.{layer}.")


# ------------------------------------------------------------------ the rule checkers
def private_name_violations() -> list[tuple[str, str, str]]:
    """Rule (a): (rule, importer, what) for every private name crossing modules."""
    out = []
    for imp in PARSED.imports:
        for name in imp.names:
            if _is_private(name):
                out.append(("private-name", imp.importer, f"{imp.target}.{name}"))
        if not _private_module_visible(imp.importer, imp.target):
            out.append(("private-module", imp.importer, imp.target))
    for importer, attrs in PARSED.attributes.items():
        for module, attr, _ in attrs:
            if _is_private(attr) and module != importer:
                out.append(("private-name", importer, f"{module}.{attr}"))
            elif not _private_module_visible(importer, module):
                out.append(("private-module", importer, module))
    return sorted(set(out))


def _known_back_edges() -> set[tuple[str, str]]:
    return {(a, b) for rule, a, b in KNOWN_VIOLATIONS if rule == "cycle"}


def _graph(*, lazy: bool) -> dict[str, set[str]]:
    """Module -> modules it imports (``lazy``: function-level imports too)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in PARSED.imports:
        if (lazy or not imp.lazy) and imp.target in MODULES and imp.target != imp.importer:
            graph[imp.importer].add(imp.target)
    return graph


def _without(graph: dict[str, set[str]], edges) -> dict[str, set[str]]:
    return {a: {b for b in targets if (a, b) not in edges} for a, targets in graph.items()}


def _unit(module: str) -> str:
    """The top-level unit of a module: ``bayespmf.fit.loop`` -> ``bayespmf.fit``."""
    return ".".join(module.split(".")[:2])


def _unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = {}
    for a, targets in graph.items():
        units.setdefault(_unit(a), set())
        for b in targets:
            units.setdefault(_unit(b), set())
            if _unit(a) != _unit(b):
                units[_unit(a)].add(_unit(b))
    return units


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def layer_violations() -> list[tuple[str, str, str]]:
    """Rule (c): (rule, importer, imported) for every import against the layering."""
    out = []
    for imp in PARSED.imports:
        layer = _layer(imp.importer)
        for banned in FORBIDDEN.get(layer or "-", ()):
            if _in_layer(imp.target, banned):
                out.append((f"layer-{layer}", imp.importer, imp.target))
        if _in_layer(imp.target, "apps") and not _in_layer(imp.importer, "apps"):
            out.append(("apps-import", imp.importer, imp.target))
    return sorted(set(out))


def _known(rule_prefix: str) -> list:
    """One param per known violation of these rules, marked xfail(strict=True)."""
    return [
        pytest.param(
            key,
            marks=pytest.mark.xfail(strict=True, reason=reason),
            id=f"{key[0]}:{key[1]}->{key[2]}",
        )
        for key, reason in sorted(KNOWN_VIOLATIONS.items())
        if key[0].startswith(rule_prefix)
    ]


def _report(title: str, found) -> str:
    return title + "\n" + "\n".join(f"  {rule}: {a} -> {b}" for rule, a, b in found)


# ------------------------------------------------------------------------------ tests
def test_scanner_sees_the_package():
    assert "bayespmf.kernels.em" in MODULES
    assert any(imp.importer == "bayespmf" for imp in PARSED.imports)
    assert any(imp.lazy for imp in PARSED.imports)


def test_no_private_name_across_modules():
    new = [v for v in private_name_violations() if v not in KNOWN_VIOLATIONS]
    assert not new, _report("private names or modules used outside their home:", new)


def test_no_import_cycle_at_module_level():
    cycles = _cycles(_graph(lazy=False))
    assert not cycles, f"module-level import cycles: {cycles}"


def test_no_import_cycle_counting_function_level_imports():
    graph = _without(_graph(lazy=True), _known_back_edges())
    assert not _cycles(graph), f"import cycles between modules: {_cycles(graph)}"
    units = _unit_graph(graph)
    assert not _cycles(units), f"import cycles between subpackages: {_cycles(units)}"


def test_layers_point_one_way():
    new = [v for v in layer_violations() if v not in KNOWN_VIOLATIONS]
    assert not new, _report("imports against the layering:", new)


def _present(violation) -> bool:
    rule, importer, target = violation
    if rule == "cycle":
        return target in _graph(lazy=True)[importer]
    if rule.startswith("private"):
        return violation in private_name_violations()
    return violation in layer_violations()


@pytest.mark.parametrize("violation", _known(""))
def test_known_violation_is_fixed(violation):
    assert not _present(violation)


def test_layer_rules_catch_a_violation():
    fake = Import("bayespmf.kernels.em", "bayespmf.fit.loop", ("iterate",), True, 1)
    PARSED.imports.append(fake)
    try:
        assert ("layer-kernels", "bayespmf.kernels.em", "bayespmf.fit.loop") in (
            layer_violations()
        )
    finally:
        PARSED.imports.remove(fake)


def test_private_rules_catch_a_violation():
    assert not _private_module_visible("bayespmf.spec", "bayespmf.datasets._registry")
    assert _private_module_visible("bayespmf.datasets", "bayespmf.datasets._registry")
    assert _private_module_visible("bayespmf.kernels.em", "bayespmf._validation")
    assert _private_module_visible("bayespmf.models.posterior", "bayespmf.models._sampling")


def test_cycle_finder():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_import_bayespmf_does_not_load_apps():
    code = (
        "import bayespmf, sys; "
        "print(sorted(m for m in sys.modules if m.startswith('bayespmf.apps')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=PACKAGE_DIR.parent,
    )
    assert result.stdout.strip().splitlines()[-1] == "[]"
