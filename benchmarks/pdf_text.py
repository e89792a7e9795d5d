"""Which PDF text extractor gives text a reader would recognise? (issue 32)

    python benchmarks/pdf_text.py [--pdfs DIR]
    python benchmarks/pdf_text.py --smoke    # two tiny hand-written PDFs, the tiny model's vocabulary (smoke.py)

DIR (default ~/.cache/sparc-local-bench/pdfs/set) holds PDFs taken from Debian documentation
packages, never installed: `apt-get download PKG && dpkg-deb -x PKG.deb x/`, then the PDFs
found there (gunzipped) copied in. Used for issue 32: auto-multiple-choice-doc-pdf (the English
manual and automultiplechoice.pdf), camlidl-doc, docbook-xsl-doc-pdf (reference.pdf),
gri-pdf-doc (gri.pdf).

A defect is a word (a run of 2+ ASCII letters, lowercased) that is not a whole word of the
model's WordPiece vocabulary AND does not occur in poppler's `pdftotext` output of the same
file: a glued ("inahistory") or split ("sa ved") word; a rare word both extractors give is not
one. Prints per extractor: defects per 1,000 words, words, seconds (one process, paired in one
run: CPU speed drifts), and a few defects as examples. pdftotext's own row is the share of its
words outside the vocabulary (its defects are 0 by construction).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparc_local.ingest.pdf import LIGATURES  # noqa: E402  (after the sys.path insert)

DEFAULT_PDFS = Path.home() / ".cache/sparc-local-bench/pdfs/set"
_WORD = re.compile(r"[A-Za-z]{2,}")


def vocabulary(model: Path | None = None) -> frozenset[str]:
    """The model's (default: the shipped one's) whole-word WordPiece entries (no ## continuation pieces)."""
    from sparc_local.model.info import ModelInfo, load_tokenizer, shipped_model_dir

    tok = load_tokenizer(ModelInfo.load(model or shipped_model_dir()).tokenizer_path)
    return frozenset(w for w in tok.get_vocab() if not w.startswith("##"))


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def defects(text: str, reference: set[str], vocab: frozenset[str]) -> list[str]:
    """The words of text that neither the vocabulary nor the reference extraction knows."""
    return [w for w in words(text) if w not in vocab and w not in reference]


def pdftotext(path: Path) -> str:
    return subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


def reference(smoke: bool) -> Callable[[Path], str]:
    """pdftotext; in a smoke run without it, an empty reference (said): every unknown word counts."""
    if smoke and shutil.which("pdftotext") is None:
        print("pdftotext is not installed (apt-get install poppler-utils): skipped, an empty reference instead")
        return lambda path: ""
    return pdftotext


def _pypdf(path: Path, mode: str) -> str:
    from pypdf import PdfReader

    return "\n".join(p.extract_text(extraction_mode=mode) or "" for p in PdfReader(path).pages)


def _pdfium(path: Path) -> str:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(path)
    try:
        return "\n".join(doc[i].get_textpage().get_text_bounded() for i in range(len(doc)))
    finally:
        doc.close()


def _pdfminer(path: Path) -> str:
    from pdfminer.high_level import extract_text

    return extract_text(str(path))


def _ingest(path: Path) -> str:
    """What sparc-local's PDF reader gives (this tree's ingest/pdf.py)."""
    from sparc_local.ingest.pdf import pdf_blocks

    return "\n".join(b.text for b in pdf_blocks(path, 10**9, 10**9)[0])


EXTRACTORS: dict[str, Callable[[Path], str]] = {
    "pypdf plain": lambda p: _pypdf(p, "plain"),
    "pypdf layout": lambda p: _pypdf(p, "layout"),
    "pypdfium2": _pdfium,
    "pdfminer.six": _pdfminer,
    "ingest/pdf.py": _ingest,
}
NEEDS = {"pypdf plain": "pypdf", "pypdf layout": "pypdf", "pypdfium2": "pypdfium2", "pdfminer.six": "pdfminer",
         "ingest/pdf.py": "pypdfium2"}  # the module each extractor imports


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pdfs", type=Path, default=DEFAULT_PDFS)
    ap.add_argument("--only", nargs="*", help="extractors to run (default: all)")
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: two tiny hand-written PDFs, the tiny test model's vocabulary, the extractors "
                         "installed here (smoke.py)")
    args = ap.parse_args()
    model = None
    if args.smoke:
        import smoke

        s = smoke.setup()
        args.pdfs, model = smoke.write_pdfs(s), s.model
        missing = [n for n in args.only or EXTRACTORS if importlib.util.find_spec(NEEDS[n]) is None]
        args.only = [n for n in args.only or EXTRACTORS if n not in missing]
        if missing:
            print(f"not installed, skipped: {', '.join(f'{n} ({NEEDS[n]})' for n in missing)}")
    files = sorted(args.pdfs.glob("*.pdf"))
    if not files:
        sys.exit(f"no PDFs in {args.pdfs}: see this file's docstring")
    vocab = vocabulary(model)
    extract_reference = reference(args.smoke)
    refs = {}
    t0 = time.perf_counter()
    for f in files:
        refs[f] = extract_reference(f)
    ref_secs = time.perf_counter() - t0
    ref_words = [w for f in files for w in words(refs[f])]
    oov = sum(w not in vocab for w in ref_words)
    print(f"{len(files)} PDFs: {', '.join(f.name for f in files)}")
    print(f"{'extractor':<15} {'defects/1k words':>16} {'words':>8} {'seconds':>8}  examples")
    print(f"{'pdftotext':<15} {'(oov ' + format(1000 * oov / max(len(ref_words), 1), '.1f') + ')':>16} "
          f"{len(ref_words):>8} {ref_secs:>8.1f}")
    names = args.only or list(EXTRACTORS)
    for name in names:
        n_words = n_bad = 0
        bad: Counter[str] = Counter()
        secs = 0.0
        for f in files:
            t0 = time.perf_counter()
            text = EXTRACTORS[name](f).translate(LIGATURES)  # as ingest/pdf.py does
            secs += time.perf_counter() - t0
            found = defects(text, set(words(refs[f])), vocab)
            n_words += len(words(text))
            n_bad += len(found)
            bad.update(found)
        rate = 1000 * n_bad / max(n_words, 1)
        print(f"{name:<15} {rate:>16.1f} {n_words:>8} {secs:>8.1f}  {' '.join(w for w, _ in bad.most_common(6))}")


if __name__ == "__main__":
    main()
