"""The layers as architecture.md draws them, checked on the package's imports (lazy ones too).

`model/` and `index/` never import `query/` (data flows ingest -> model -> index -> query),
`watch/` never imports `app/` (the application layer is on top), and the product never imports
the lab (`sparc_lab/`) or torch: the wheel ships without them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sparc_local"


def imports(path: Path) -> set[str]:
    """Every absolute module name a file imports, at the top or inside a function."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


def offenders(folder: str, banned: tuple[str, ...]) -> list[str]:
    """`folder`'s imports of a banned module or of anything below one."""
    return sorted(f"{p.relative_to(PACKAGE)}: {name}" for p in (PACKAGE / folder).rglob("*.py")
                  for name in imports(p) if any(name == b or name.startswith(b + ".") for b in banned))


@pytest.mark.parametrize("folder", ["model", "index", "ingest"])
def test_lower_layers_never_import_the_query_side(folder: str) -> None:
    assert offenders(folder, ("sparc_local.query",)) == []


def test_the_watcher_never_imports_the_application_layer() -> None:
    """`app/` starts the watcher and hands it what applies other commands' requests (``run.watch``)."""
    assert offenders("watch", ("sparc_local.app",)) == []


def test_the_product_never_imports_the_lab_or_torch() -> None:
    assert offenders(".", ("sparc_lab", "torch")) == []


def test_the_check_sees_lazy_imports(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from sparc_local.query.tokens import query_token_ids\n    import torch.nn\n")
    assert imports(f) == {"sparc_local.query.tokens", "torch.nn"}
