"""The one batch -> encode -> write loop (batch_writer.BatchWriter), the lazy encoder it is given,
and the small model-side helpers the pipeline shares (SparseVectors.head, index_is_stale)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from sparc_local.batch_writer import BatchWriter
from sparc_local.index.store import FileUpdate, Index, SentenceRow
from sparc_local.model.encoder import Encoder, EncoderFactory, LazyEncoder
from sparc_local.model.info import (
    CONFIG_FILE,
    INDEX_MODEL_KEY,
    INDEX_SETTINGS_KEY,
    ModelInfo,
    index_is_stale,
    record_model,
)
from sparc_local.model.sparse import SparseVectors

FILES = {  # path -> paragraphs of sentences: 3, 2 and 4 sentences
    "/docs/a.txt": [["The green tea was built in Paris.", "The tower is by the river."], ["Boil the water first."]],
    "/docs/b.txt": [["Black tea takes longer.", "It took one year to build."]],
    "/docs/c.txt": [["The museum sells a ticket.", "The king built a school.", "A train station is near.",
                     "The river runs past the tower."]],
}


def _update(path: str, paragraphs: list[list[str]]) -> FileUpdate:
    rows = []
    for para in paragraphs:
        context = " ".join(para)
        rows += [SentenceRow(text=s, context=context, offset_in_context=context.find(s)) for s in para]
    return FileUpdate(path, size=1, mtime=1.0, hash=path, sentences=rows)


class _Counting:
    """An encoder factory that counts the models it loads."""

    def __init__(self, info: ModelInfo) -> None:
        self.factory, self.calls = EncoderFactory(info, threads=1), 0

    def __call__(self) -> Encoder:
        self.calls += 1
        return self.factory()


def _segments(index: Index) -> int:
    return index.conn.execute("SELECT COUNT(*) FROM segments").fetchone()[0]


def test_files_are_written_whole_one_segment_per_batch(tmp_path: Path, tiny_model_dir: Path) -> None:
    info = ModelInfo.load(tiny_model_dir)
    factory, written, encoded = _Counting(info), [], []
    with Index(tmp_path / "index.db") as index:
        writer = BatchWriter(index, LazyEncoder(factory), batch_sentences=4, merge=False,
                             on_encoded=lambda path, n: encoded.append((path, n)),
                             on_written=lambda batch: written.append([u.path for u in batch]))
        updates = {path: _update(path, paras) for path, paras in FILES.items()}
        writer.add(updates["/docs/a.txt"], FILES["/docs/a.txt"])
        assert written == [] and factory.calls == 0  # 3 sentences: below the batch size
        writer.add(updates["/docs/b.txt"], FILES["/docs/b.txt"])
        assert written == [["/docs/a.txt", "/docs/b.txt"]]
        writer.add(updates["/docs/c.txt"], FILES["/docs/c.txt"])
        writer.flush()  # nothing left: no empty batch
        assert written == [["/docs/a.txt", "/docs/b.txt"], ["/docs/c.txt"]]
        assert _segments(index) == 2
        assert index.stats()["sentences"] == 9 and len(index.all_files()) == 3
        assert sum(n for _, n in encoded) == 9 and encoded[-1][0] == "/docs/c.txt"
    assert factory.calls == 1  # loaded once, on the first batch

    # each file got its own rows of one encoder pass over the batch's paragraphs
    reference = Encoder(info, threads=1).encode(FILES["/docs/a.txt"] + FILES["/docs/b.txt"])
    for got, (start, stop) in ((updates["/docs/a.txt"].vectors, (0, 3)), (updates["/docs/b.txt"].vectors, (3, 5))):
        want = reference.slice(start, stop)
        assert len(got) == stop - start
        assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.token_ids, want.token_ids)
        assert np.array_equal(got.weights, want.weights)


def test_nothing_to_encode_never_loads_the_model(tmp_path: Path) -> None:
    """Unreadable and empty files, and updates that come with their vectors (eval's cached ones),
    are written without an encoder."""
    def no_model() -> Encoder:
        raise AssertionError("the model was loaded")

    cached = _update("/docs/cached.txt", [["Green tea.", "Black tea."]])
    cached.vectors = SparseVectors.from_rows([(np.array([5, 7]), np.array([2.0, 1.0])), (np.array([9]), np.array([1.5]))])
    with Index(tmp_path / "index.db") as index:
        for encoder in (LazyEncoder(no_model), None):
            writer = BatchWriter(index, encoder, batch_sentences=1)
            writer.add(FileUpdate("/docs/locked.txt", 1, 1.0, "", error="permission denied"))
            writer.add(FileUpdate("/docs/empty.txt", 0, 1.0, "e"))
            writer.add(cached)
            writer.flush()
        files = {f.path: f.status for f in index.all_files()}
        assert files == {"/docs/locked.txt": "error", "/docs/empty.txt": "ok", "/docs/cached.txt": "ok"}
        assert index.stats()["sentences"] == 2


def test_lazy_encoder_loads_on_first_use_and_releases(tiny_model_dir: Path) -> None:
    factory = _Counting(ModelInfo.load(tiny_model_dir))
    encoder = LazyEncoder(factory)
    assert not encoder.loaded and encoder.threads == 0 and factory.calls == 0
    first = encoder.encode(FILES["/docs/b.txt"])
    encoder.encode(FILES["/docs/b.txt"])
    assert encoder.loaded and encoder.threads == 1 and factory.calls == 1 and len(first) == 2
    encoder.release()
    assert not encoder.loaded and encoder.threads == 0
    again = encoder.encode(FILES["/docs/b.txt"])
    assert factory.calls == 2 and np.array_equal(again.token_ids, first.token_ids)


@pytest.mark.parametrize("k", [0, 1, 3, 50])
def test_head_keeps_each_rows_first_k_pairs(k: int) -> None:
    rng = np.random.default_rng(k)
    rows = [(rng.integers(0, 100, n), np.sort(rng.random(n))[::-1]) for n in (0, 3, 7, 1, 0, 10)]
    got = SparseVectors.from_rows(rows).head(k)
    want = SparseVectors.from_rows([(t[:k], w[:k]) for t, w in rows])
    assert len(got) == len(rows) and got.indptr.dtype == np.int64 and got.token_ids.dtype == np.int32
    for i in range(len(rows)):
        assert np.array_equal(got.row(i)[0], want.row(i)[0]) and np.array_equal(got.row(i)[1], want.row(i)[1])


def test_an_older_sparc_json_with_weight_cap_still_loads(tmp_path: Path, tiny_model_dir: Path) -> None:
    folder = tmp_path / "old"
    shutil.copytree(tiny_model_dir, folder)
    config = json.loads((folder / CONFIG_FILE).read_text())
    assert "weight_cap" not in config  # an export no longer writes it
    config["weight_cap"] = 16.0
    (folder / CONFIG_FILE).write_text(json.dumps(config))
    assert ModelInfo.load(folder).to_json() == ModelInfo.load(tiny_model_dir).to_json()


def test_index_is_stale_only_for_another_model(tmp_path: Path, tiny_model_dir: Path) -> None:
    info = ModelInfo.load(tiny_model_dir)
    with Index(tmp_path / "index.db") as index:
        assert not index_is_stale(index, info)  # nothing encoded yet
        index.set_meta(INDEX_MODEL_KEY, info.id)
        assert not index_is_stale(index, info)
        index.set_meta(INDEX_MODEL_KEY, "other-model@0123456789ab")
        assert index_is_stale(index, info)


def test_index_is_stale_for_the_same_weights_at_another_window(tmp_path: Path, tiny_model_dir: Path) -> None:
    """The same weights exported at another max_length share the id (the onnx digest) and encode
    other vectors: the index records the settings too, and `index` re-encodes every sentence. An
    index that recorded no settings is taken as the model's own and gets them at its next run."""
    from sparc_local.index_options import IndexOptions
    from sparc_local.pipeline import run_index

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The green tea was built in Paris. The tower is by the river.\n\nBoil the water.\n")
    info = ModelInfo.load(tiny_model_dir)
    wide = tmp_path / "wide"
    shutil.copytree(tiny_model_dir, wide)
    config = json.loads((wide / CONFIG_FILE).read_text())
    config["max_length"] += 32
    (wide / CONFIG_FILE).write_text(json.dumps(config))
    other = ModelInfo.load(wide)
    assert other.id == info.id and other.settings != info.settings
    with Index(tmp_path / "index.db") as index:
        record_model(index, info)
        assert not index_is_stale(index, info) and index_is_stale(index, other)
        index.set_meta(INDEX_SETTINGS_KEY, None)  # an index encoded before settings were recorded
        assert not index_is_stale(index, info) and not index_is_stale(index, other)

    with Index(tmp_path / "built.db") as index:
        first = run_index(index, [str(docs)], info, lambda: Encoder(info, threads=1), IndexOptions())
        assert first.encoded == 3 and index.get_meta(INDEX_SETTINGS_KEY) == info.settings
        assert run_index(index, [str(docs)], info, lambda: Encoder(info, threads=1), IndexOptions()).encoded == 0
        again = run_index(index, [str(docs)], other, lambda: Encoder(other, threads=1), IndexOptions())
        assert again.encoded == 3 and index.get_meta(INDEX_SETTINGS_KEY) == other.settings
        index.set_meta(INDEX_SETTINGS_KEY, None)
        assert run_index(index, [str(docs)], other, lambda: Encoder(other, threads=1), IndexOptions()).encoded == 0
        assert index.get_meta(INDEX_SETTINGS_KEY) == other.settings and not index_is_stale(index, other)
