"""The import rules of docs/architecture.md, checked on the source: which package may import which.

Every module of the four packages is parsed (not imported) and each of its imports of a project
package is checked against RULES. A violation names the module, the line and the rule.
"""

from __future__ import annotations

import ast

import pytest

from sim.paths import REPO_ROOT

PROJECT = ("firmware_model", "hw", "compiler", "sim")
# package (or sub-package) -> the project packages it may import; the most specific entry applies
RULES = {
    "firmware_model": ("firmware_model",),
    "firmware_model.tosa_ops": ("firmware_model.tosa_ops", "firmware_model.errors"),
    "firmware_model.arch": ("firmware_model.arch", "firmware_model.errors", "firmware_model.tosa_ops.dtypes"),
    "hw": ("hw", "firmware_model.arch", "firmware_model.errors", "firmware_model.tosa_ops.dtypes"),
    "compiler": ("compiler", "firmware_model"),
    "sim": PROJECT,
}
# Third-party packages the layers below sim must not need at run time.
FORBIDDEN_THIRD_PARTY = {
    "firmware_model": ("amaranth", "cocotb", "tosa_tools", "serializer", "tosa"),
    "compiler": ("amaranth", "cocotb"),
    "hw": ("cocotb",),
}


def _modules():
    for pkg in PROJECT:
        for path in sorted((REPO_ROOT / pkg).rglob("*.py")):
            if "recipes" in path.parts:      # run in their own TensorFlow environment
                continue
            rel = path.relative_to(REPO_ROOT).with_suffix("")
            name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
            yield name, path


def _rule_for(module: str) -> tuple[str, tuple[str, ...]]:
    best = max((k for k in RULES if module == k or module.startswith(k + ".")), key=len)
    return best, RULES[best]


def _imports(path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
            for a in node.names:       # `from firmware_model import golden` imports a sub-package
                yield node.lineno, f"{node.module}.{a.name}"


@pytest.mark.parametrize("module,path", list(_modules()), ids=lambda v: v if isinstance(v, str) else "")
def test_imports_follow_the_layering(module, path):
    key, allowed = _rule_for(module)
    top = module.split(".")[0]
    bad = []
    for lineno, imported in _imports(path):
        head = imported.split(".")[0]
        if head in PROJECT:
            # `from x import name` also yields x.name; only the module part must be allowed
            if not any(imported == a or imported.startswith(a + ".") for a in allowed) and \
                    not any(imported.rsplit(".", 1)[0] == a or imported.rsplit(".", 1)[0].startswith(a + ".")
                            for a in allowed if "." in imported):
                bad.append(f"line {lineno}: {imported} ({key} may import {', '.join(allowed)})")
        elif head in FORBIDDEN_THIRD_PARTY.get(top, ()):
            bad.append(f"line {lineno}: {imported} ({top} must run without {head})")
    assert not bad, f"{module}:\n" + "\n".join(bad)
