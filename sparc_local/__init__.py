"""sparc-local: private question answering over your own files (SPARC, a learned sparse retriever).

``from sparc_local import Library`` is the Python API (docs/api.md); it loads on first use, so
importing the package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Library", "__version__"]

if TYPE_CHECKING:
    from sparc_local.app.library import Library


def __getattr__(name: str) -> Any:
    if name == "Library":
        from sparc_local.app.library import Library

        return Library
    raise AttributeError(f"module 'sparc_local' has no attribute {name!r}")
