"""Progressive indexing: every new or changed file is stored with its text and BM25 postings
first, so `ask` answers at once; the encoder runs after, and a finished index is the same
whatever happened in between (kill -9 in both passes: tests/test_crash.py)."""

from __future__ import annotations

from pathlib import Path

from sparc_local.index.store import Index
from sparc_local.model.encoder import Encoder
from sparc_local.model.info import ModelInfo
from sparc_local.pipeline import run_index
from sparc_local.query.ask import Asker

NOTES = {
    "tea.txt": "Green tea should steep for three minutes. Black tea takes five minutes.",
    "bridge.txt": "The bridge over the river was built in 1890. It is made of iron.",
    "bread.txt": "Bread rises in a warm oven. Sourdough needs a starter.",
}


def _docs(root: Path) -> Path:
    root.mkdir()
    for name, text in NOTES.items():
        (root / name).write_text(text + "\n")
    return root


def _answers(db: Path, info: ModelInfo, question: str, mode: str = "hybrid") -> list[tuple[str, str, float]]:
    with Index(db) as idx:
        return [(Path(a.path).name, a.sentence, a.score) for a in Asker(idx, info).ask(question, k=3, mode=mode)]


def test_answers_from_bm25_while_the_encoder_runs(tmp_path: Path, tiny_model_dir: Path):
    info = ModelInfo.load(tiny_model_dir)
    docs = _docs(tmp_path / "docs")
    db = tmp_path / "index.db"
    asked: list = []

    def on_progress(p) -> None:  # the first moment of the encoding pass: every file is stored
        if p.phase == "encoding" and not asked:
            with Index(db) as reader:
                asked.append((reader.encoded_counts(), Asker(reader, info).ask("how long does green tea steep", k=1)))

    with Index(db) as idx:
        report = run_index(idx, [str(docs)], info, lambda: Encoder(info, threads=1), on_progress=on_progress)
        assert (report.indexed, report.sentences) == (3, 6)
        assert idx.encoded_counts() == (6, 6) and idx.pending_files() == [] and idx.verify() == []
    (counts, answers), = asked
    assert counts == (0, 6)  # nothing encoded yet...
    assert [Path(a.path).name for a in answers] == ["tea.txt"]  # ...and answered already, from BM25
    assert answers[0].sentence == "Green tea should steep for three minutes."


def test_a_stopped_run_leaves_answers_and_the_next_run_encodes_them(tmp_path: Path, tiny_model_dir: Path):
    """Stopped as the encoding pass begins (as on battery): the files are answerable; the next
    run, with nothing changed on disk, encodes them, and the result is the same as one run."""
    info = ModelInfo.load(tiny_model_dir)
    docs = _docs(tmp_path / "docs")
    phase = {}

    def note(p) -> None:
        phase["now"] = p.phase

    once, twice = tmp_path / "once.db", tmp_path / "twice.db"
    with Index(twice) as idx:
        stopped = run_index(idx, [str(docs)], info, lambda: Encoder(info, threads=1), on_progress=note,
                            should_stop=lambda: phase.get("now") == "encoding")
        assert stopped.stopped and idx.encoded_counts() == (0, 6)
        assert [f.path for f in idx.pending_files()] == sorted(str(docs / n) for n in NOTES)
    bm25_only = _answers(twice, info, "when was the bridge built")
    assert bm25_only[0][:2] == ("bridge.txt", "The bridge over the river was built in 1890.")
    assert _answers(twice, info, "when was the bridge built", mode="sparc") == []  # no vectors yet
    with Index(twice) as idx:
        report = run_index(idx, [str(docs)], info, lambda: Encoder(info, threads=1))
        assert (report.indexed, report.unchanged) == (0, 3)  # nothing read again: only encoded
        assert idx.encoded_counts() == (6, 6) and idx.verify() == []
    with Index(once) as idx:
        run_index(idx, [str(docs)], info, lambda: Encoder(info, threads=1))
    for question in ("when was the bridge built", "how long does green tea steep", "what does sourdough need"):
        for mode in ("hybrid", "sparc", "bm25"):
            assert _answers(twice, info, question, mode) == _answers(once, info, question, mode), (question, mode)
