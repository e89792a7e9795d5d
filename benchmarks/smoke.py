"""What a benchmark's `--smoke` runs on: the tiny test model (tests/tiny.py, fp32 and int8) and a
tiny ReQA set, written into a fresh scratch folder that is also the data dir (SPARC_LOCAL_HOME).

A smoke run takes each script's own code path in seconds, so a refactor that breaks a script
fails CI (tests/test_benchmarks.py runs every script that has one); its figures mean nothing.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = Path.home() / ".cache" / "sparc-local-bench"


@dataclass(frozen=True)
class Smoke:
    folder: Path
    model: Path  # the tiny model, fp32
    model_int8: Path  # the same weights, int8 (export.QUANT_WEIGHTS)
    data: Path  # a tiny ReQA set: 24 sentences in 6 passages, a question per sentence


def setup() -> Smoke:
    """The tiny models and set in a new folder under SCRATCH, removed when the script exits."""
    sys.path.insert(0, str(ROOT))  # the clone's top: tests/ is not installed
    from tests.tiny import make_tiny_model, write_reqa_set

    SCRATCH.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="smoke-", dir=SCRATCH))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    home = folder / "home"
    home.mkdir(mode=0o700)
    os.environ["SPARC_LOCAL_HOME"] = str(home)
    write_reqa_set(folder / "tiny-set", seed=0, articles=["a00", "a01"])
    return Smoke(folder, make_tiny_model(folder / "tiny").path, make_tiny_model(folder / "tiny-int8", int8=True).path,
                 folder / "tiny-set")


def lab_data(s: Smoke) -> Path:
    """The lab's training sets (sparc_lab.data.TRAIN_SETS), tiny, in a folder of s: du2017-train holds the
    held-out articles (DU_VALIDATION_ARTICLES) that the trainer validates on and input_rule.py reads."""
    from sparc_lab.data import DU_VALIDATION_ARTICLES, TRAIN_SETS
    from tests.tiny import write_reqa_set

    data = s.folder / "reqa"
    for k, name in enumerate(TRAIN_SETS):
        held_out = sorted(DU_VALIDATION_ARTICLES) if name == "du2017-train" else []
        write_reqa_set(data / name, seed=k, articles=["a12", *held_out])
    return data


@dataclass(frozen=True)
class AdaptSmoke:
    model: Path  # the tiny model with its MLM head (tests/tiny.make_tiny_adapt_model)
    data: Path  # a tiny ReQA set of 108 sentences: above adapt's minimum corpus (AdaptOptions.min_sentences)
    home: Path  # setup()'s SPARC_LOCAL_HOME; with indexed=True its index holds data's sentences


def adapt_setup(s: Smoke, indexed: bool = False) -> AdaptSmoke:
    """What `adapt` needs beside setup()'s: a model with an MLM head and a corpus it accepts, in s.folder;
    ``indexed``: that corpus indexed by the model in the home, as adapt_e2e.py indexes a ReQA set (common.build_index)."""
    from common import build_index

    from tests.tiny import make_tiny_adapt_model, write_reqa_set

    write_reqa_set(s.folder / "adapt-set", seed=1, articles=[f"a{i:02d}" for i in range(9)])
    a = AdaptSmoke(make_tiny_adapt_model(s.folder / "tiny-adapt").path, s.folder / "adapt-set",
                   Path(os.environ["SPARC_LOCAL_HOME"]))
    if indexed:
        build_index(a.data, a.model, threads=1)
    return a


def adapted_model(a: AdaptSmoke) -> Path:
    """A model `adapt` trained (3 steps) on the index of adapt_setup(s, indexed=True)."""
    from sparc_local.adapt.run import AdaptOptions, train_adapted_model
    from sparc_local.index.store import Index
    from sparc_local.model.info import ModelInfo
    from sparc_local.paths import db_path

    with Index(db_path()) as idx:
        r = train_adapted_model(idx, AdaptOptions(steps=3, batch_size=4, max_length=16, lr=1e-3),
                                model=ModelInfo.load(a.model))
    return r.model.path


def write_pdf(path: Path, pages: list[list[str]]) -> Path:
    """A minimal PDF written by hand (no generator needed): each page's lines in Helvetica, one
    text line each, ASCII only."""
    def escape(line: str) -> str:
        return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for lines in pages:
        stream = "BT /F1 11 Tf 14 TL 72 720 Td " + " ".join(f"({escape(t)}) Tj T*" for t in lines) + " ET"
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream".encode("ascii"))
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {len(objects)} 0 R "
                       "/Resources << /Font << /F1 3 0 R >> >> >>".encode("ascii"))
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>".encode("ascii")
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode("ascii") + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode("ascii")
    out += b"".join(f"{o:010d} 00000 n \n".encode("ascii") for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode("ascii")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(out))
    return path


# desk.py's format (benchmarks/desk/): a file's name on the desk, the file as installed and its text
# (trip.md ships gzipped); the questions, the desk file that answers each and a substring of its
# answer sentence. Words of the tiny vocabulary.
DESK_FILES = {
    "tea.txt": ("tea.txt", "Green tea should steep for three minutes.\n\nBlack tea wants boiling water in the cup.\n"),
    "history.html": ("history.html", "<html><body><h1>History</h1><p>The king built the tower in one year. "
                                     "The queen paid for the bridge.</p></body></html>"),
    "trip.md": ("trip.md.gz", "# Travel\n\nThe train station is by the river.\n\n```\ntrain --city paris\n```\n"),
}
DESK_PDF = "music.pdf", [["The piano school is near the museum.", "The museum ticket was for the history of music."]]
DESK_QUESTIONS = [("how long should green tea steep?", "tea.txt", "Green tea should steep"),
                  ("who built the tower?", "history.html", "king built the tower"),
                  ("where is the train station?", "trip.md", "train station is by the river"),
                  ("where is the piano school?", "music.pdf", "piano school is near the museum")]


def write_desk(s: Smoke) -> Path:
    """A tiny desk for desk.py (and units.py --desk): its data folder (sources.txt, questions.tsv) in
    s.folder, its files as installed beside it."""
    from common import QUESTIONS_FILE, SOURCES_FILE

    installed = write_tree(s.folder / "desk-sources", dict(DESK_FILES.values()))
    write_pdf(installed / DESK_PDF[0], DESK_PDF[1])
    sources = {name: installed / file for name, (file, _) in DESK_FILES.items()} | {DESK_PDF[0]: installed / DESK_PDF[0]}
    data = s.folder / "desk-data"
    data.mkdir()
    (data / SOURCES_FILE).write_text("# package\tinstalled file\tname on the desk\n"
                                     + "".join(f"smoke-desk\t{src}\t{name}\n" for name, src in sources.items()))
    (data / QUESTIONS_FILE).write_text("".join(f"{q}\t{n}\t{a}\n" for q, n, a in DESK_QUESTIONS))
    return data


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write each file under root (an absolute name is taken below root); a name ending in .gz is
    gzipped, as Debian ships text."""
    import gzip

    for name, text in files.items():
        path = root / Path(name).relative_to(Path(name).anchor)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(text.encode(), mtime=0) if name.endswith(".gz") else text.encode())
    return root


# a page in the format of each of faq_set.py's parsers: questions ("?") with prose answers, code, a
# heading with no "?"; {n} numbers the page, so each page's questions are its own
FAQ_PAGES = {
    "pod": "=head1 NAME\n\nperlfaq{n} - tea\n\n=head2 How long should green tea steep in cup {n}?\n\n"
           "Green tea should steep for three minutes. Then drink it.\n\n    steep --minutes 3\n\n"
           "=head2 Tea notes\n\nBlack tea wants C<boiling> water.\n",
    "text": "1. Travel\n2. History\n\n1. Travel\n\n1.1. Where is the train station {n}?\n\n"
            "The train station is by the river. The city is old.\n\n2. History\n\n2.1. Who built the tower?\n\n"
            "The king built the tower in one year.\n",
    "html": "<html><head><style>p {{}}</style></head><body><h2>Where is the piano school {n}?</h2>"
            "<p>The piano school is near the museum.</p><pre>piano --school</pre><h2>Music</h2>"
            "<p>The museum ticket was for music.</p><dl><dt>Is the book on the page?</dt>"
            "<dd>The book page has the history of the war.</dd></dl></body></html>",
}


# documentation as Debian installs it (units.py, structure.py): per package an HTML manual, Markdown
# and text notes, with code, LaTeX, an equation number, heading-only units, a table, a list and a
# question line; python3-doc is kept out of every count
DOC_FILES = {
    "teadoc/html/index.html": "<html><body><h1>Tea</h1><h2>Green tea</h2><p>Green tea should steep for three "
                              "minutes.</p><h2>Black tea</h2><h3>Water</h3><p>Black tea wants boiling water.</p>"
                              "<pre>steep --minutes 3\nboil water</pre><p>The time is \\( \\frac{a}{b} \\) "
                              "minutes.</p><p>(117)</p><table><tr><td>green</td><td>three minutes</td></tr>"
                              "<tr><td>black</td><td>five minutes</td></tr></table><ul><li>Boil the water.</li>"
                              "<li>Steep the tea.</li></ul><p>Q: How long should tea steep?</p>"
                              "<p>Three minutes for green tea.</p></body></html>",
    "teadoc/README.md": "# Travel\n\n## Trains\n\nThe train station is by the river.\n\n```\ntrain --city paris\n```\n\n"
                        "History\n-------\n\nThe king built the tower in one year.\n\n## Music\n",
    "teadoc/notes.txt": "The museum ticket was for music.\n\n    piano --school\n    book page\n\n"
                        "The piano school is near the museum.\n",
    "python3-doc/index.html": "<html><body><p>Kept out of every count.</p></body></html>",
}
DOC_PDF = [["The king built the tower in one year.", "Green tea should steep for three minutes."],
           ["The piano school is near the museum.", "- Boil the water. - Steep the tea."]]


def write_pdfs(s: Smoke) -> Path:
    """A folder of s holding two tiny PDFs (DOC_PDF's, DESK_PDF's), for pdf_text.py and structure.py."""
    folder = s.folder / "pdfs"
    write_pdf(folder / "doc.pdf", DOC_PDF)
    write_pdf(folder / DESK_PDF[0], DESK_PDF[1])
    return folder
