"""The dependency rule of the README's Layout, read from the code: packages import only downward.

Every import counts, the lazy ones inside functions too (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWED: dict[str, set[str]] = {
    "schemas": set(),
    "infra": {"schemas"},
    "fold": {"schemas"},
    "lake": {"infra", "schemas"},
    "sandboxes": {"schemas"},
    "ingest": {"infra", "schemas"},
    "importers": {"ingest", "schemas"},
    "judges": {"sandboxes", "ingest", "schemas"},
    "rollouts": {"judges", "sandboxes", "ingest", "lake", "schemas"},
    "learners": {"lake", "ingest", "schemas"},
    "pipelines": {"fold", "lake", "judges", "sandboxes", "ingest", "infra", "schemas"},
    "api": {"lake", "schemas"},
}
"""What each package may import (``trajlake``, the composition root, may import everything)."""


def test_packages_import_only_downward() -> None:
    packages = set(ALLOWED) | {"trajlake"}
    found: dict[str, list[str]] = {}
    for pkg, allowed in ALLOWED.items():
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in packages and top != pkg and top not in allowed:
                        found.setdefault(f"{pkg} -> {top}", []).append(
                            f"{path.relative_to(ROOT)}:{node.lineno}"
                        )
    assert not found, found
