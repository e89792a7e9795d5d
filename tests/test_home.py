"""A real home folder (issue 48): bounded paragraphs, machine-written text, tools' folders, text
files known by name, legacy encodings, and what `index` and `status` say about them."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.cli.app import app
from sparc_local.cli.render import index_summary
from sparc_local.index.store import Index
from sparc_local.ingest.extract import MAX_PARAGRAPH_CHARS, extract, iter_files
from sparc_local.ingest.machine import verdict
from sparc_local.pipeline import IndexReport

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("active_tiny")

# Real lines: this machine's /var/log/dpkg.log, alternatives.log and kernel ring buffer, and the
# journal's syslog format (`journalctl -o short`)
DPKG = """2025-06-24 14:36:34 status half-installed libtirpc-common:all 1.3.3+ds-1
2025-06-24 14:36:34 status unpacked libtirpc-common:all 1.3.3+ds-1
2025-06-24 14:36:34 install libtirpc3:amd64 <none> 1.3.3+ds-1
2025-06-24 14:36:34 status half-installed libtirpc3:amd64 1.3.3+ds-1
2025-06-24 14:36:34 status unpacked libtirpc3:amd64 1.3.3+ds-1
""" * 5
ALTERNATIVES = """update-alternatives 2025-06-24 14:36:53: run with --quiet --install /usr/bin/pager pager /usr/bin/less 77
update-alternatives 2025-06-24 14:36:53: link group pager updated to point to /usr/bin/less
""" * 12
DMESG = """[    0.000000] x86/fpu: Supporting XSAVE feature 0x001: 'x87 floating point registers'
[    0.000000] x86/fpu: Supporting XSAVE feature 0x002: 'SSE registers'
[    0.004000] Memory: 24534120K/25165424K available (16384K kernel code, 2935K rwdata)
[    0.120000] clocksource: tsc-early: mask: 0xffffffffffffffff max_cycles: 0x2b9ca42ad8e
""" * 6
SYSLOG = """Nov 27 23:49:07 ana-laptop systemd[1]: Started Session 4 of User ana.
Nov 27 23:49:08 ana-laptop sshd[2211]: Accepted publickey for ana from 192.168.1.20 port 50122 ssh2
Nov 27 23:49:12 ana-laptop NetworkManager[640]: <info>  [1764287352.1234] device (wlp2s0): state change
""" * 8
CSV = "date,description,amount\n" + "".join(f"2026-01-{d:02d},CARD PAYMENT {d},-{d}.50\n" for d in range(1, 29))
PROSE = "\n".join(
    f"Line {i} of a letter kept without blank lines: the garden needs water on Tuesdays, and the hedge "
    "is cut in May, when the birds have left their nests." for i in range(40))


@pytest.mark.parametrize("text", [DPKG, ALTERNATIVES, DMESG, SYSLOG, CSV], ids=["dpkg", "alternatives", "dmesg",
                                                                             "syslog", "csv"])
def test_real_log_lines_are_machine_written(text: str):
    assert verdict(text) is not None


def test_prose_is_not_machine_written():
    assert verdict(PROSE) is None
    man = Path(__file__).resolve().parent.parent / "README.md"
    assert verdict(man.read_text()) is None
    assert verdict(DPKG[:300]) is None  # too few lines to tell: indexed


def test_a_file_without_blank_lines_is_cut_into_bounded_paragraphs(tmp_path: Path):
    lines = [f"Entry {i}: the parcel for flat {i} was left with the concierge on Monday." for i in range(4000)]
    path = tmp_path / "notes.md"
    path.write_text("# Deliveries\n" + "\n".join(lines) + "\n")
    blocks = extract(path)
    assert len(blocks) > 100 and max(len(b.text) for b in blocks) <= MAX_PARAGRAPH_CHARS
    # each piece keeps its lines whole, is headed by the section's heading and cites its own first line
    for b in blocks:
        assert b.text.startswith("Deliveries Entry ") and b.heads == (len("Deliveries"),)
        assert b.line == int(b.text.split()[2].rstrip(":")) + 2


def _peak_bytes_of_reading(folder: Path) -> int:
    """The peak of Python's and numpy's allocations while `index` reads ``folder`` and stores its
    text and BM25 postings, with the shipped model's tokenizer (its vocabulary is what makes an
    unbounded paragraph cost: each sentence is posted with every token of its paragraph). The run
    stops before encoding: no encoder is loaded."""
    import tracemalloc

    from sparc_local.index_options import IndexOptions
    from sparc_local.model.info import ModelInfo, shipped_model_dir
    from sparc_local.pipeline import run_index

    info = ModelInfo.load(shipped_model_dir())
    asked = []
    with Index(folder.parent / f"{folder.name}.db") as idx:
        tracemalloc.start()
        try:
            run_index(idx, [str(folder)], info, lambda: None, IndexOptions(logs=True),
                      should_stop=lambda: asked.append(1) is None and len(asked) > 1)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def test_memory_does_not_grow_with_a_paragraph_without_blank_lines(tmp_path: Path):
    """800 lines without a blank line cost what the same lines with blank lines cost (an
    unbounded paragraph's cost grows with its square: 4,000 such lines peaked at 1.44 GB against
    0.48 GB with blank lines; benchmarks/memory.py measures the whole process)."""
    import random

    from sparc_local.model.info import shipped_model_dir

    rng = random.Random(48)
    vocab = [w for w in (shipped_model_dir() / "tokenizer.json").read_text().split('"') if w.isalpha() and len(w) > 4]
    lines = [" ".join(rng.choices(vocab, k=10)) + "." for _ in range(800)]
    flat, spaced = tmp_path / "flat", tmp_path / "spaced"
    flat.mkdir()
    spaced.mkdir()
    (flat / "a.txt").write_text("\n".join(lines))
    (spaced / "a.txt").write_text("\n".join(line + ("\n" if i % 20 == 19 else "") for i, line in enumerate(lines)))
    peak_flat, peak_spaced = _peak_bytes_of_reading(flat), _peak_bytes_of_reading(spaced)
    assert peak_flat < 1.25 * peak_spaced, (peak_flat, peak_spaced)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_tools_folders_are_skipped_and_no_ignore_takes_them(tmp_path: Path):
    root = _tree(tmp_path / "home", {
        "notes.md": "Mine.",
        "proj/setup.py": "",
        "proj/build/lib/x.txt": "Build output.",
        "proj/docs/_build/html/index.html": "<p>Sphinx output.</p>",
        "proj/node_modules/left-pad/README.md": "Install it with npm.",
        "proj/__pycache__/x.txt": "Cache.",
        "proj/env/pyvenv.cfg": "home = /usr/bin",
        "proj/env/lib/README.txt": "A virtualenv's file.",
        "proj/lib/site-packages/a/README.md": "Installed.",
        "proj/lib/a-1.0.dist-info/README.txt": "Metadata.",
        "copy/python3.11/__future__.py": "",
        "copy/python3.11/test/data.txt": "The standard library's test data.",
        "trip/build/plan.md": "A folder named build, in no project: the user's.",
    })
    walked = {p.relative_to(root).as_posix() for p in iter_files([root])}
    assert walked == {"notes.md", "trip/build/plan.md"}
    everything = {p.relative_to(root).as_posix() for p in iter_files([root], ignore_files=False)}
    assert len(everything) == 10


def test_text_files_known_by_name_and_iso_2022(tmp_path: Path):
    root = _tree(tmp_path / "docs", {"README": "The spare key is under the blue pot.", "Makefile": "all:\n\ttrue\n",
                                      "proj/CHANGELOG": "Version two adds the night mode."})
    (root / "회의.txt").write_bytes("회의는 매주 화요일 오전 열 시에 시작합니다.\n".encode("iso2022_kr"))
    assert runner.invoke(app, ["index", str(root), "-q"]).exit_code == 0
    with Index() as idx:
        assert {Path(f.path).name for f in idx.all_files()} == {"README", "CHANGELOG", "회의.txt"}
        db = idx.path
    with sqlite3.connect(db) as con:
        texts = {t for (t,) in con.execute("SELECT text FROM sentences")}
    assert "회의는 매주 화요일 오전 열 시에 시작합니다." in texts  # decoded, not called binary


def test_machine_written_text_is_left_out_and_said(tmp_path: Path):
    root = _tree(tmp_path / "docs", {"letter.txt": PROSE, "syslog.txt": SYSLOG})
    result = runner.invoke(app, ["index", str(root)])
    assert result.exit_code == 0
    skipped, summary = result.output.splitlines()
    assert skipped == (f"skipped {root / 'syslog.txt'}: looks machine-written (a log: 100% of its lines begin "
                       "with a time); `sparc-local index --logs` indexes it")
    assert re.fullmatch(r"Indexed 1 files \(40 sentences\), 0 unchanged, 0 removed, 0 unreadable, "
                        r"1 machine-written left out \(--logs\) in \d+\.\ds\.", summary), summary
    st = json.loads(runner.invoke(app, ["status", "--json"]).output)
    assert st["errors"] == [] and [e["path"] for e in st["machine_written"]] == [str(root / "syslog.txt")]
    assert "Left out:     1 machine-written (logs, data; `index --logs` indexes them)\n" in runner.invoke(
        app, ["status"]).output
    # unchanged, it is not read again; with --logs it is indexed
    again = runner.invoke(app, ["index", str(root)]).output
    assert re.fullmatch(r"Indexed 0 files \(0 sentences\), 1 unchanged, 0 removed, 0 unreadable, "
                        r"1 machine-written left out \(--logs\) in \d+\.\ds\.\n", again), again
    forced = runner.invoke(app, ["index", str(root), "--logs"]).output
    assert re.fullmatch(r"Indexed 1 files \(\d+ sentences\), 1 unchanged, 0 removed, 0 unreadable in \d+\.\ds\.\n",
                        forced), forced
    assert json.loads(runner.invoke(app, ["status", "--json"]).output)["machine_written"] == []


def test_a_name_with_a_newline_stays_on_its_line(tmp_path: Path):
    root = _tree(tmp_path / "docs", {"bad\nname.txt": "The boiler is serviced every October."})
    assert runner.invoke(app, ["index", str(root), "-q"]).exit_code == 0
    out = runner.invoke(app, ["ask", "boiler serviced", "-k", "1"]).output
    assert out.splitlines()[0] == f"1. {root}/bad\\nname.txt:1  score 1.80"


def test_summary_says_what_this_run_encoded():
    left = IndexReport(indexed=0, sentences=0, encoded=20113, unchanged=5, seconds=12.0)
    assert index_summary(left) == ("Indexed 0 files (0 sentences; encoded 20113), 5 unchanged, 0 removed, "
                                   "0 unreadable in 12.0s.")
    normal = IndexReport(indexed=2, sentences=7, encoded=7, seconds=1.0)
    assert index_summary(normal) == "Indexed 2 files (7 sentences), 0 unchanged, 0 removed, 0 unreadable in 1.0s."


def test_out_of_memory_is_an_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docs: Path):
    import sparc_local.pipeline as pipeline

    def boom(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(pipeline, "run_index", boom)
    result = runner.invoke(app, ["index", str(docs)])
    assert result.exit_code == 1
    assert result.output == ("Error: out of memory; everything indexed before this point is kept\n"
                             "Close other programs and run the command again, or leave the largest files out "
                             "(`--exclude GLOB`, `--max-sentences N`).\n")


def test_migration_7_reads_again_a_file_stored_with_a_long_paragraph(tmp_path: Path, docs: Path):
    assert runner.invoke(app, ["index", str(docs), "-q"]).exit_code == 0
    with Index() as idx:
        db = idx.path
    con = sqlite3.connect(db)
    with con:
        tea = con.execute("SELECT id FROM files WHERE path LIKE '%tea.md'").fetchone()[0]
        con.execute("UPDATE paragraphs SET text = text || ? WHERE id IN "
                    "(SELECT paragraph_id FROM sentences WHERE file_id = ?)", (" x" * 1500, tea))
        con.execute("PRAGMA user_version = 6")
    con.close()
    with Index() as idx:
        files = {Path(f.path).name: f for f in idx.all_files()}
    assert files["tea.md"].size == -1 and files["city.txt"].size > 0
    out = runner.invoke(app, ["index", str(docs)]).output
    assert re.fullmatch(r"Indexed 1 files \(3 sentences\), 1 unchanged, 0 removed, 0 unreadable in \d+\.\ds\.\n", out)
