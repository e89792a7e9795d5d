"""`IndexOptions`: what one `run_index` is asked to do, as one frozen value.

Kept apart from ``pipeline`` (numpy, the store) so the CLI can declare its defaults at parse time
without loading them. ``to_json``/``from_json`` are the one (de)serialiser: `index` hands its
options to a running watcher through them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

# per file (`index --max-sentences`): with the paragraph bound, what bounds the memory a file costs
# (benchmarks/memory.py); above the longest books (a thousand-page manual holds some 30,000)
MAX_SENTENCES = 50_000
BATCH_SENTENCES = 512  # sentences per write transaction (one segment)


@dataclass(frozen=True)
class IndexOptions:
    """How a run walks and writes; the defaults are `index`'s. The watcher's batches pass
    ``remember_roots``, ``prune`` and ``compact`` False (see ``run_index``)."""

    exclude: Iterable[str] = ()  # `--exclude` globs
    include_hidden: bool = False  # `--hidden`
    ignore_files: bool = True  # honour .gitignore / .ignore and skip tools' folders (`--no-ignore` turns it off)
    logs: bool = False  # also index text that looks machine-written: logs, data dumps (`--logs`)
    max_sentences: int = MAX_SENTENCES  # sentences indexed per file, at most
    batch_sentences: int = BATCH_SENTENCES  # sentences per committed batch
    remember_roots: bool = True  # the roots are paths the user named: remembered, un-forgotten
    prune: bool = True  # drop indexed files under the roots that no longer exist
    compact: bool = True  # compact the segments at the end

    def __post_init__(self) -> None:
        object.__setattr__(self, "exclude", tuple(self.exclude))  # a list from the CLI or JSON: frozen too

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "exclude": list(self.exclude)}

    @classmethod
    def from_json(cls, data: dict) -> IndexOptions:
        """The inverse of ``to_json``; a field it lacks takes its default, one it does not know is ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
