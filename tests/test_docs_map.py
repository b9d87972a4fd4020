"""docs/architecture.md is a map of src/corral: every path and module it names exists, every package and module has
its row, and the migrations it quotes are the ones there are. A move that forgets the map fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "corral"
DOC = ROOT / "docs" / "architecture.md"
MIGRATIONS = SRC / "store" / "migrations" / "versions"

# `core/jobspec/spec.py`, `executor/limits/`, `tests/store/test_fresh_schema.py`, `web/static/pages/plan.js`
SLASHED = re.compile(r"^[A-Za-z_][\w.-]*(?:/[\w.-]+)*/(?:[\w.-]+\.(?:py|js|sh|md|toml|html|css))?$")
# `core.jobspec.spec.build_spec`, `corral.server.usage.UsageLedger`
DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
FILE_SUFFIXES = (".py", ".js", ".json", ".toml", ".md", ".sh", ".lock", ".log", ".sock", ".db", ".token", ".html",
                 ".css", ".txt", ".wandb")


def _spans(text: str) -> list[str]:
    """The text of every inline code span, code blocks left out (they draw trees and layers, not paths)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [span.strip() for span in re.findall(r"`([^`\n]+)`", prose)]


def _packages() -> list[str]:
    return sorted(path.parent.relative_to(SRC).as_posix() + "/" for path in SRC.rglob("__init__.py")
                  if "migrations" not in path.parts)


def _modules() -> list[str]:
    return sorted(path.relative_to(SRC).as_posix() for path in SRC.rglob("*.py")
                  if path.name not in ("__init__.py", "__main__.py") and "migrations" not in path.parts)


def slashed_path_exists(span: str) -> bool:
    """A path named as a file or a folder: from the repository's root, or from src/corral."""
    return any((base / span).exists() for base in (ROOT, ROOT / "src", SRC))


def dotted_name_resolves(span: str) -> bool:
    """`pkg.module.attr`: the modules exist, and the first name after the last module is defined in it."""
    parts = span.split(".")
    if parts[0] == "corral":
        parts = parts[1:]
    place = SRC
    for index, part in enumerate(parts):
        if (place / part / "__init__.py").exists():
            place = place / part
            continue
        source = place / f"{part}.py"
        if source.exists():
            if index + 1 == len(parts):
                return True
            return re.search(rf"\b{re.escape(parts[index + 1])}\b", source.read_text()) is not None
        # an attribute of a package: defined (or imported) in its __init__.py
        init = place / "__init__.py"
        return init.exists() and re.search(rf"\b{re.escape(part)}\b", init.read_text()) is not None
    return True


def named_paths(text: str) -> tuple[list[str], list[str]]:
    top = {path.stem if path.is_file() else path.name for path in SRC.iterdir()
           if path.suffix == ".py" or (path / "__init__.py").exists()} - {"__init__"}
    slashed = [span for span in _spans(text) if "<" not in span and SLASHED.match(span)]
    dotted = [span for span in _spans(text) if DOTTED.match(span) and not span.endswith(FILE_SUFFIXES)
              and span.split(".")[0] in top | {"corral"}]
    return slashed, dotted


def test_every_path_the_map_names_exists():
    slashed, _ = named_paths(DOC.read_text())
    missing = sorted({span for span in slashed if not slashed_path_exists(span)})
    assert missing == [], f"docs/architecture.md names paths that are not there: {missing}"


def test_every_module_the_map_names_by_its_dotted_name_exists():
    _, dotted = named_paths(DOC.read_text())
    missing = sorted({span for span in dotted if not dotted_name_resolves(span)})
    assert missing == [], f"docs/architecture.md names modules or names in them that are not there: {missing}"


def _table_rows(text: str) -> set[str]:
    """The first cell of every table row: `| `server/usage.py` | ... |` gives `server/usage.py`."""
    return {match for match in re.findall(r"^\|\s*`([^`]+)`", text, flags=re.M)}


def test_every_package_has_a_row():
    rows = _table_rows(DOC.read_text())
    missing = [package for package in _packages() if package not in rows and package != "./"]
    assert missing == [], f"give these packages a row in docs/architecture.md's Packages table: {missing}"


def test_every_module_has_a_row():
    rows = _table_rows(DOC.read_text())
    missing = [module for module in _modules() if module not in rows]
    assert missing == [], f"give these modules a row in docs/architecture.md's Modules tables: {missing}"


def test_the_map_quotes_the_newest_migration():
    newest = max(path.name for path in MIGRATIONS.glob("[0-9]*.py"))
    assert f"`{newest}`" in DOC.read_text(), f"docs/architecture.md's migrations end before {newest}"


def test_the_checks_see_what_they_must():
    text = "`server/usage.py` `no/such.py` `core.scheduling.priority.prioritize` `core.scheduling.nope` " \
           "`server.usage.NoSuchName` `server.json` `JobService.submit`\n```\nnot/a/path.py\n```\n"
    slashed, dotted = named_paths(text)
    assert slashed == ["server/usage.py", "no/such.py"]
    assert dotted == ["core.scheduling.priority.prioritize", "core.scheduling.nope", "server.usage.NoSuchName"]
    assert [dotted_name_resolves(span) for span in dotted] == [True, False, False]
    assert [slashed_path_exists(span) for span in slashed] == [True, False]
