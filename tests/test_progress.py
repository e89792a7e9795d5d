"""`index` progress: files and sentences done of the total, the rate, the time left, the current file."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from sparc_local.cli.progress import IndexLines, Rate, describe
from sparc_local.index.store import Index
from sparc_local.index_options import IndexOptions
from sparc_local.model.info import ModelInfo
from sparc_local.pipeline import Progress, run_index

pytestmark = pytest.mark.usefixtures("active_tiny")


def _run(root: Path, info: ModelInfo, options: IndexOptions = IndexOptions()) -> tuple:
    from sparc_local.model.encoder import Encoder

    seen: list[Progress] = []
    with Index() as idx:
        report = run_index(idx, [str(root)], info, lambda: Encoder(info, threads=1), options,
                           on_progress=lambda p: seen.append(dataclasses.replace(p)))
    return report, seen


def test_unchanged_files_never_count(tmp_path: Path, tiny_model_dir: Path):
    info = ModelInfo.load(tiny_model_dir)
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(3):
        (root / f"f{i}.txt").write_text(f"Note {i} is about tea. It has two sentences.\n")
    report, seen = _run(root, info)
    assert [p.phase for p in seen][:1] == ["indexing"] and seen[-1].phase == "finishing"
    last = seen[-1]
    assert (last.scanned, last.files_total, last.files_done) == (3, 3, 3)
    assert last.sentences_done == last.sentences_read == report.sentences == 6

    (root / "f0.txt").write_text("Note zero now is about coffee.\n")  # changed
    os.utime(root / "f1.txt", (5, 5))  # same content, another mtime: hashed, found unchanged
    (root / "new.txt").write_text("A new note about bread.\n")
    report, seen = _run(root, info)
    assert (report.indexed, report.unchanged, report.sentences) == (2, 2, 2)
    first = next(p for p in seen if p.phase == "indexing")
    assert (first.scanned, first.files_total) == (4, 3)  # f2 skipped by its stat; f0, f1, new.txt to look at
    last = seen[-1]
    assert (last.files_total, last.files_done, last.sentences_done) == (2, 2, 2)  # f1 left the total
    assert all(p.files_done <= p.files_total and p.sentences_done <= p.sentences_read for p in seen)

    _, seen = _run(root, info)  # nothing changed: nothing counted as done
    assert (seen[-1].scanned, seen[-1].files_total, seen[-1].files_done, seen[-1].sentences_done) == (4, 0, 0, 0)


def test_moves_within_a_large_file(tmp_path: Path, tiny_model_dir: Path):
    """One file of 400 sentences is one batch: stored first, then the progress moves with each
    encoder batch in it."""
    info = ModelInfo.load(tiny_model_dir)
    root = tmp_path / "docs"
    root.mkdir()
    big = root / "big.txt"
    big.write_text(" ".join(f"Sentence {i} is about the river." for i in range(400)) + "\n")
    report, seen = _run(root, info, IndexOptions(batch_sentences=10_000))
    inside = [p for p in seen if p.phase == "encoding" and p.batches == 1 and p.sentences_done]
    assert report.sentences == 400 and len({p.sentences_done for p in inside}) >= 10
    assert {p.current for p in inside} == {str(big)}
    # stored (one batch: answerable by BM25), encoded, not yet written again
    assert inside[-1].sentences_done == inside[-1].sentences_pending == 400 and inside[-1].files_done == 1
    assert seen[-1].files_done == 1 and seen[-1].batches == 2


def test_sentence_estimate_from_unread_bytes():
    p = Progress(phase="indexing", files_total=4, bytes_total=4000, bytes_read=1000, sentences_read=30)
    assert p.sentences_estimate() == 120
    assert Progress(bytes_total=10, bytes_read=10, sentences_read=7).sentences_estimate() == 7
    assert Progress(bytes_total=10).sentences_estimate() == 0


def test_describe_exact_lines():
    p = Progress(phase="scanning", scanned=1200)
    assert describe(p, 0.0) == "scanning: 1200 files"
    # reading: text and BM25 postings stored, so the files are answerable before they are encoded
    p = Progress(phase="indexing", scanned=80, files_total=73, files_done=12, bytes_total=7300, bytes_read=1500,
                 sentences_read=4000, current="/home/ana/notes/report.txt")
    assert describe(p, 4000 / 120, width=200) == ("12/73 files, 4000/~19467 sentences read, 33/s, 7:44 left, "
                                             "/home/ana/notes/report.txt")
    # the path is cut from the left, at a folder, to fit the terminal (80 columns by default)
    assert describe(p, 4000 / 120) == "12/73 files, 4000/~19467 sentences read, 33/s, 7:44 left, …/notes/report.txt"
    assert describe(p, 4000 / 120, width=75) == "12/73 files, 4000/~19467 sentences read, 33/s, 7:44 left, …/report.txt"
    assert describe(p, 4000 / 120, width=62) == "12/73 files, 4000/~19467 sentences read, 33/s, 7:44 left"
    slow = dataclasses.replace(p, sentences_read=100, bytes_read=40, current=None)
    assert describe(slow, 100 / 60) == "12/73 files, 100/~18250 sentences read, 2/s, 3:01:30 left"
    # encoding: the rate and the time left are the encoder's
    enc = dataclasses.replace(p, phase="encoding", files_done=73, bytes_read=7300, sentences_read=19467,
                              sentences_pending=19467, sentences_done=3000)
    assert describe(enc, 3000 / 120, width=200) == ("encoding: 73/73 files read, encoded 3000 of 19467 sentences, 25/s, "
                                               "10:59 left, /home/ana/notes/report.txt")
    done = dataclasses.replace(enc, sentences_done=19467, phase="finishing", current=None)
    assert describe(done, 5.0) == "finishing: 73/73 files, 19467/19467 sentences read"
    # a file name with a newline stays on its line
    odd = dataclasses.replace(p, current="/home/ana/a\nb.txt")
    assert describe(odd, 4000 / 120, width=200).endswith(", /home/ana/a\\nb.txt")


def test_rate_is_smoothed_over_a_minute():
    rate = Rate(tau=60.0)
    assert rate.update(0.0, 0) == 0.0
    assert rate.update(10.0, 1000) == 100.0  # the first measure is taken as it is
    slower = rate.update(20.0, 1100)  # 10/s for ten seconds: the estimate moves, without jumping to 10
    assert 80.0 < slower < 90.0
    assert rate.update(20.5, 1200) == slower  # under a second: not measured


def test_index_lines_when_not_a_terminal():
    from io import StringIO

    from rich.console import Console

    out = StringIO()
    lines = IndexLines(Console(file=out, width=80), enabled=True)
    now = [0.0]
    lines.clock = lambda: now[0]
    p = Progress(phase="indexing", files_total=10, bytes_total=1000, bytes_read=0, sentences_read=0)
    for i in range(0, 11):
        now[0] = i * 5.0
        lines.update(dataclasses.replace(p, files_done=i, bytes_read=i * 100, sentences_read=i * 50))
    shown = out.getvalue().splitlines()
    # nothing in the first 10 seconds, then a line at each tenth
    assert shown[0] == "2/10 files, 100/~500 sentences read, 10/s, 0:40 left"
    assert len(shown) == 9 and shown[-1] == "10/10 files, 500/500 sentences read, 10/s, 0:00 left"
