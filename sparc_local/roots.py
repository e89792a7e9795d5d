"""The folders and files a command works on: the paths the user gave, else those indexed before.

One rule for `index` and `watch`, so that both accept and refuse the same paths with the same words.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from sparc_local.errors import UserError


def resolve(given: Sequence[str | os.PathLike], remembered: Callable[[], list[str]], command: str, *,
            missing_ok: bool = False) -> list[str]:
    """Absolute roots (the watcher runs in another folder): ``given``, else ``remembered()``
    (called only then). UserError when there is none, or when one does not exist; with
    ``missing_ok`` a remembered root may be missing (the watcher waits for it to come back)."""
    from sparc_local.ingest.extract import path_key

    roots = [str(p) for p in given] or remembered()
    if not roots:
        raise UserError(f"no folder to {command}", f"Run `sparc-local {command} FOLDER`.")
    for root in roots if given or not missing_ok else []:
        if not Path(root).expanduser().exists():
            raise UserError(f"{path_key(root)}: no such file or folder", "Check the path and try again.")
    return [str(Path(r).expanduser().absolute()) for r in roots]
