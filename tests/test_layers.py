"""The layers of docs/architecture.md hold: import-linter's contracts in pyproject.toml, and a pure core."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "src" / "corral" / "core"

# What core may call of `os`: path arithmetic on strings, which touches no filesystem and reads no environment.
PURE_OS = {"os.path.join", "os.path.normpath", "os.path.basename", "os.path.dirname", "os.path.split",
           "os.path.splitext", "os.path.isabs", "os.path.commonpath", "os.sep"}
# Calls that do touch the outside, each with why it is still there. Nothing else may join this list.
KNOWN_IMPURE = {
    ("jobspec/paths.py", "os.path.expanduser"): "expands `~` against the server's HOME; to be taken as a parameter",
}


def test_the_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def impure_uses(source: str) -> list[tuple[int, str]]:
    """Each use of `os` beyond path arithmetic, and each call of the builtin `open`."""
    tree = ast.parse(source)
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:  # the whole of `os.path.isdir`, once
            name = _dotted(node)
            if name is not None and name.split(".")[0] == "os" and name not in PURE_OS:
                found.append((node.lineno, name))
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "os.path"):
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                      if f"{node.module}.{alias.name}" not in PURE_OS]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            found.append((node.lineno, "open"))
    return sorted(found)


def _core_uses() -> list[tuple[str, int, str]]:
    return [(path.relative_to(CORE).as_posix(), line, name) for path in sorted(CORE.rglob("*.py"))
            for line, name in impure_uses(path.read_text())]


def test_every_core_module_lives_in_its_concern():
    """core/ holds only its concerns' sub-packages (pyproject's "The core's concerns point down"), no flat module."""
    flat = sorted(path.name for path in CORE.glob("*.py") if path.name != "__init__.py")
    assert flat == [], f"put these in the sub-package of their concern: {flat}"
    concerns = sorted(path.name for path in CORE.iterdir() if (path / "__init__.py").exists())
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contract if c.get("containers") == ["corral.core"])
    assert concerns == sorted(name.strip() for layer in layers for name in layer.split("|"))


def test_core_touches_no_filesystem_and_reads_no_environment():
    impure = [f"core/{file}:{line}: {name}" for file, line, name in _core_uses() if (file, name) not in KNOWN_IMPURE]
    assert not impure, "core is pure (no filesystem, processes, environment): " + ", ".join(impure)


def test_the_purity_check_sees_what_it_must():
    source = "import os\nfrom os.path import isdir\nos.path.join('a', os.path.basename(x))\nos.stat(p)\nopen(p)\n"
    assert impure_uses(source) == [(2, "os.path.isdir"), (4, "os.stat"), (5, "open")]


def test_the_impure_calls_let_through_are_still_there():
    """An entry of KNOWN_IMPURE whose call is gone goes too: the list only ever shrinks."""
    used = {(file, name) for file, _, name in _core_uses()}
    assert set(KNOWN_IMPURE) <= used, sorted(set(KNOWN_IMPURE) - used)


MAX_MODULE_LINES = 500


def test_no_module_is_over_500_lines():
    # a module past this does several jobs: split it by concept, as executor/limits/ and client/ were
    long = {str(path.relative_to(ROOT / "src")): n for path in (ROOT / "src").rglob("*.py")
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines: {long}"


def _imported(source: str) -> set[str]:
    """Every module a source imports, those only for typing (under TYPE_CHECKING) included."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return names


def test_the_parts_of_the_job_service_never_reach_back_into_it():
    """What JobService composes takes its collaborators in its constructor: none imports the service, not even
    for a type, so that no part reads the service's other parts behind their backs (issue 32, point 3)."""
    server = ROOT / "src" / "corral" / "server"
    parts = {name.removeprefix("corral.server.") for name in _imported((server / "service.py").read_text())
             if name.startswith("corral.server.")}
    reaching = sorted(part for part in parts if (server / f"{part}.py").exists()
                      and "corral.server.service" in _imported((server / f"{part}.py").read_text()))
    assert parts and reaching == []
