"""The writes themselves, on an index that is open and held by this writer: the one call each of
`index` and `forget` makes, whoever runs it (the command, or the watcher it hands its request to).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparc_local.forget import ForgetReport
    from sparc_local.index.store import Index
    from sparc_local.index_options import IndexOptions
    from sparc_local.model.info import ModelInfo
    from sparc_local.pipeline import IndexReport, Progress


def index_into(index: Index, roots: list[str], options: IndexOptions, model: ModelInfo,
               encoder_factory: Callable[[], object], *, on_error: Callable[[str, str], None] | None = None,
               on_capped: Callable[[str, int], None] | None = None,
               on_progress: Callable[[Progress], None] | None = None,
               should_stop: Callable[[], bool] | None = None) -> IndexReport:
    """``pipeline.run_index`` of absolute ``roots``."""
    from sparc_local.pipeline import run_index

    return run_index(index, roots, model, encoder_factory, options, on_error=on_error, on_capped=on_capped,
                     on_progress=on_progress, should_stop=should_stop)


def forget_from(index: Index, path: str) -> ForgetReport:
    """``forget.forget`` of an absolute ``path``."""
    from sparc_local.forget import forget

    return forget(index, path)
