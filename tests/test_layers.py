"""The package's layers, read from the source: every import (function-local ones too) goes to the module's own layer
or one below it, the import graph has no cycle (a module importing a submodule also runs its packages' __init__),
few package imports hide inside functions, and the modules every method runs through name no method."""

import ast
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "harnessrl_jax"

# Bottom to top; a module belongs to the layer of its longest listed prefix (docs/design.md draws them).
LAYERS = (
    ("words and errors", ("harnessrl_jax", "errors", "words", "jsonl", "timing", "tensorboard_log")),
    ("the parts", ("models", "rollout", "rl", "rubric", "harness", "memory", "evolver", "data", "toy", "failures",
                   "agentic",
                   "eval.agreement", "eval.stats", "eval.oracle", "eval.ood")),
    ("the step's stages", ("settings", "stages")),
    ("methods", ("methods",)),
    ("set-up, the stepper, config checks", ("build", "stepper", "checks")),
    ("evaluation drivers, the oracle run, the command line", ("eval", "cli")),
    ("launch scripts", ("launch",)),
)
# Function-local imports of the package's own modules: few, each one a reason (an optional dependency behind it).
MAX_LOCAL_IMPORTS = 20
# The modules one step of any method runs through: no method is named in them.
METHOD_FREE = ("build.py", "stepper.py", "checks.py", "stages.py")


def modules():
    """{dotted module name: path} of the package and the launch scripts."""
    out = {}
    for top in (PACKAGE, "launch"):
        for directory, _, files in os.walk(os.path.join(REPO, top)):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(directory, f)
                    name = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
                    out[name.removesuffix(".__init__")] = path
    return out


MODULES = modules()


def layer_of(module: str) -> int:
    rel = module if module.startswith("launch") else module.removeprefix(PACKAGE).lstrip(".") or PACKAGE
    best = max(((len(prefix), i) for i, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes
                if rel == prefix or rel.startswith(prefix + ".")), default=None)
    assert best is not None, f"{module} is in no layer: add it to LAYERS (and to docs/design.md's picture)"
    return best[1]


def resolve(name: str) -> str | None:
    """The module `name` is, or the innermost module it is an attribute of; None outside the repository."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str, path: str):
    """(target module, line, inside a function) of every import of the package or launch in `module`."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: len(module.split(".")) - node.level + path.endswith("__init__.py")]
                base = ".".join(parts + ([node.module] if node.module else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        up, local = node, False
        while up in parents:
            up = parents[up]
            local = local or isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef))
        for name in names:
            target = resolve(name) if name.split(".")[0] in (PACKAGE, "launch") else None
            if target is not None and target != module:
                yield target, node.lineno, local


EDGES = {m: list(imports(m, p)) for m, p in MODULES.items()}


def test_every_import_goes_to_the_same_layer_or_below():
    wrong = [f"{m}:{line} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})"
             for m, edges in EDGES.items() for t, line, _ in edges if layer_of(t) > layer_of(m)]
    assert not wrong, "\n".join(wrong)


def test_the_import_graph_has_no_cycle():
    """Tarjan's strongly connected components over every import, where importing a.b.c also runs a/__init__ and
    a/b/__init__ (except the packages the importer is itself inside, which ran first)."""
    graph = {}
    for m, edges in EDGES.items():
        out = set()
        for t, _, _ in edges:
            out.add(t)
            parts = t.split(".")
            for k in range(1, len(parts)):
                ancestor = ".".join(parts[:k])
                if ancestor in MODULES and not (m == ancestor or m.startswith(ancestor + ".")):
                    out.add(ancestor)
        graph[m] = out
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_few_package_imports_hide_inside_functions():
    local = [f"{m}:{line} -> {t}" for m, edges in EDGES.items() if m.startswith(PACKAGE)
             for t, line, inside in edges if inside]
    assert len(local) <= MAX_LOCAL_IMPORTS, "\n".join(local)


def test_the_layers_are_read_from_the_source():
    """The checks above are not vacuous: the graph holds the imports everyone knows are there."""
    targets = {m: {t for t, _, _ in e} for m, e in EDGES.items()}
    assert "harnessrl_jax.stages" in targets["harnessrl_jax.stepper"]
    assert "harnessrl_jax.methods.base" in targets["harnessrl_jax.methods.grpo"]
    assert "harnessrl_jax.stepper" in targets["launch.train"]  # a function-local import, counted
    assert layer_of("harnessrl_jax.eval.oracle") < layer_of("harnessrl_jax.stages") < layer_of(
        "harnessrl_jax.methods.sec") < layer_of("harnessrl_jax.build") < layer_of("harnessrl_jax.eval.evaluate")


@pytest.mark.parametrize("filename", METHOD_FREE)
def test_the_step_names_no_method(filename):
    from harnessrl_jax import methods

    names = set(methods.METHODS)
    tree = ast.parse(open(os.path.join(REPO, PACKAGE, filename), encoding="utf-8").read())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found += [(node.lineno, w) for w in re.findall(r"[a-z0-9_]+", node.value.lower()) if w in names]
        elif isinstance(node, ast.Attribute) and node.attr in names:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Name) and node.id in names and node.id != "grpo":  # rl.grpo: the loss module
            found.append((node.lineno, node.id))
    assert not found, f"{filename} names methods: {found}"
