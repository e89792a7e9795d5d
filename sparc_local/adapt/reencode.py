"""Re-encode an existing index with another model into a new database, then switch to it.

`adapt` (and `adapt --revert`) change the model, so every sentence must be encoded again. The
files are not read again (they may have changed or gone since): the sentences, their stored
paragraphs and the file records are copied from the old database, and the encoder gets each
paragraph's sentences, as `index` gave them (inputs.paragraph_inputs builds both).

The switch (``Database.replace_with``) copies the finished database into the live one with
SQLite's online backup, as one write transaction: readers (`ask`) keep their snapshot of the old
index until the switch commits and see the new one afterwards; a crash before the commit leaves
the old index untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sparc_local.batch_writer import BatchWriter, stored_update
from sparc_local.index.db import LAST_UPDATE, MODEL_PATH, WEIGHT_SCALE, remove_database
from sparc_local.index.store import FileStatus, FileUpdate, Index
from sparc_local.model.encoder import Encoder, LazyEncoder
from sparc_local.model.info import INDEX_MODEL_KEY, INDEX_SETTINGS_KEY, ModelInfo, record_model
from sparc_local.model.lexical import Lexical

_SKIP_META = {WEIGHT_SCALE, INDEX_MODEL_KEY, INDEX_SETTINGS_KEY, MODEL_PATH, LAST_UPDATE}


def reencode(src: Index, dst_path: Path, info: ModelInfo, encoder_factory: Callable[[], Encoder], *,
             on_progress: Callable[[int, int], None] | None = None) -> int:
    """Build dst_path: src's roots, meta, files and sentences, encoded with `info`'s model.

    `on_progress(done, total)` counts sentences, after each committed batch; the model is loaded
    only if there is a sentence to encode. Returns the number of sentences encoded.
    """
    remove_database(dst_path)
    sentence_ids = src.sentence_ids_by_file()
    total = sum(len(v) for v in sentence_ids.values())
    done = 0
    with Index(dst_path) as dst:
        dst.set_weight_scale(src.weight_scale)
        dst.add_roots(src.roots())
        for key, value in src.meta().items():
            if key not in _SKIP_META:
                dst.set_meta(key, value)

        def written(batch: list[FileUpdate]) -> None:
            nonlocal done
            done += sum(len(u.sentences) for u in batch)
            if on_progress:
                on_progress(done, total)

        if on_progress:
            on_progress(0, total)  # the phase has begun: the first batch takes a while
        writer = BatchWriter(dst, LazyEncoder(encoder_factory), merge=False, on_written=written)
        lexical = Lexical.of(info)
        for rec in src.all_files():
            if rec.status != FileStatus.OK:
                writer.add(FileUpdate(rec.path, rec.size, rec.mtime, rec.hash, error=rec.error or "error"))
                continue
            ids = sentence_ids.get(rec.id, [])
            writer.add(*stored_update(rec, src.sentences(ids) if ids else [], lexical))
        writer.flush()
        dst.merge_all()
        record_model(dst, info)
        dst.set_meta(MODEL_PATH, str(info.path))
        last = src.get_meta(LAST_UPDATE)
        if last is not None:
            dst.set_meta(LAST_UPDATE, last)
        dst.checkpoint()
    return done
