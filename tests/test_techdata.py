"""techdata: documentation files to (question, answer sentences) pairs, and the kept-out guard."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

from sparc_lab import naturalset, techdata, techpkgs
from sparc_lab.techparse import html_sections, man_sections, render_man, text_sections, xml_sections
from sparc_local.evaluation import reqa

FAQ = """\
Frequently asked questions about frobnicate

1. How do I frobnicate a widget?
2. Why is it slow?

1. How do I frobnicate a widget?

  Run the frob command on it. The widget is changed in place.

2. Why is it slow?

  It reads every byte twice. A faster mode is planned.

    $ frob --fast widget.dat
"""

HTML = """<html><head><title>Frob manual</title><style>p {}</style></head><body>
<div class="sphinxsidebar"><h3>Navigation</h3><p>Go somewhere else entirely.</p></div>
<h1>Frob manual</h1>
<h2>Installing the frob tool</h2>
<p>Copy the binary into your path. Then run it once to create its settings file.</p>
<pre>cp frob /usr/local/bin</pre>
<h2>Description</h2>
<p>Frob changes widgets in many ways.</p>
<dl><dt>-v, --verbose</dt><dd><p>Print every widget that is changed.</p></dd>
<dt>widget</dt><dd>A file that frob can change.</dd></dl>
<h3>Can frob undo a change?</h3>
<p>No. Keep a copy of the widget before you change it.</p>
</body></html>
"""

MAN = """.TH FROB 1
.SH NAME
frob \\- change widgets
.SH DESCRIPTION
.B frob
changes widgets in place. It never asks before it does so.
.SH OPTIONS
.TP
.B \\-v, \\-\\-verbose
Print every widget that is changed.
.TP
.B \\-q
Print nothing at all, even on errors.
.SH CHANGING MANY WIDGETS
Give several files at once. Frob changes them in the order given.
"""


def pairs(sections):
    return [(s.heading, s.kind, list(s.paragraphs)) for s in sections if s.heading]


def test_text_faq_questions_skip_the_table_of_contents_and_code():
    got = pairs(text_sections(FAQ))
    assert [(h, k) for h, k, p in got if p] == [("1. How do I frobnicate a widget?", "faq"),
                                                ("2. Why is it slow?", "faq")]
    answers = {h: p for h, _, p in got if p}
    assert answers["2. Why is it slow?"] == ["It reads every byte twice. A faster mode is planned."]


def test_html_headings_definitions_and_code():
    got = pairs(html_sections(HTML))
    assert ("Installing the frob tool", "heading",
            ["Copy the binary into your path. Then run it once to create its settings file."]) in got
    assert ("-v, --verbose", "option", ["Print every widget that is changed."]) in got
    assert ("widget", "term", ["A file that frob can change."]) in got
    assert ("Can frob undo a change?", "faq", ["No. Keep a copy of the widget before you change it."]) in got
    assert all("Navigation" not in h and "cp frob" not in " ".join(p) for h, _, p in got)


@pytest.mark.skipif(shutil.which("groff") is None, reason="man pages are rendered with groff")
def test_man_page_sections_and_options():
    got = pairs(man_sections(render_man(MAN.encode())))
    assert ("-v, --verbose", "option", ["Print every widget that is changed."]) in got
    assert ("-q", "option", ["Print nothing at all, even on errors."]) in got
    assert ("CHANGING MANY WIDGETS", "heading",
            ["Give several files at once. Frob changes them in the order given."]) in got


def test_unit_pairs_answers_and_never_indexes_a_question(tmp_path):
    doc = tmp_path / "usr/share/doc/frob"
    doc.mkdir(parents=True)
    (doc / "FAQ").write_text(FAQ)
    (doc / "manual.html").write_text(HTML)
    with gzip.open(doc / "changelog.gz", "wt") as f:
        f.write("Is this a question?\n\n  A changelog is never read, it is not prose people ask about.\n")
    unit = techdata.build_unit("frob", ["frob-doc"], [tmp_path])
    texts = {r["id"]: r["text"] for r in unit.corpus}
    got = {q["question"]: (q["kind"], [texts[a] for a in q["answers"]]) for q in unit.queries}
    assert got["Why is it slow?"] == ("faq", ["It reads every byte twice.", "A faster mode is planned."])
    assert got["Installing the frob tool"][0] == "heading"
    assert "Description" not in got  # generic
    assert "Is this a question?" not in got
    assert not set(got) & set(texts.values())
    out = tmp_path / "out"
    techdata.write_set(out, unit.corpus, unit.queries, {})
    first = (out / "queries.jsonl.gz").read_bytes()
    techdata.write_set(out, unit.corpus, unit.queries, {})
    assert (out / "queries.jsonl.gz").read_bytes() == first
    assert json.loads((out / "meta.json").read_text())["queries"] == len(unit.queries)


@pytest.mark.parametrize("package,source", [("python3.11-doc", "python3.11"), ("bash", "bash"),
                                            ("python-flask-doc", "flask"), ("git-man", "git"),
                                            ("libcurl4-openssl-dev", "curl"), ("r-cran-zoo", "zoo")])
def test_guard_refuses_kept_out_and_test_set_packages(package, source):
    blocked = frozenset({"git", "curl"})  # as blocked_sources() finds them from git-doc, libcurl4-doc
    with pytest.raises(techpkgs.KeptOut):
        techpkgs.guard(package, source, blocked)


def test_guard_lets_other_packages_through():
    techpkgs.guard("tar", "tar", frozenset({"git"}))


DOCBOOK = """<?xml version="1.0" ?>
<!DOCTYPE chapter PUBLIC "-//KDE//DTD DocBook XML V4.5-Based Variant V1.1//EN" "dtd/kdedbx45.dtd" [
  <!ENTITY frob "Frob">
]>
<chapter id="faq"><title>Questions and Answers</title>
<chapterinfo><authorgroup><author>Someone Else</author></authorgroup></chapterinfo>
<qandaset><qandaentry>
<question><para>Can &frob; change two widgets at once</para></question>
<answer><para>Yes. Give both files on the command line.</para>
<screen>frob a.dat b.dat</screen></answer>
</qandaentry></qandaset></chapter>
"""


def test_docbook_question_is_an_faq_even_without_a_question_mark():
    got = pairs(xml_sections(DOCBOOK))
    assert ("Can frob change two widgets at once", "faq", ["Yes. Give both files on the command line."]) in got


def _build(root, split, units):
    """A technical set as techdata.build writes it: units {name: [(question, answer text)]}."""
    for name, pairs in units.items():
        corpus = [{"id": f"0000-{i:05d}-0", "text": a, "passage": f"0000-{i:05d}", "position": 0}
                  for i, (_, a) in enumerate(pairs)]
        queries = [{"id": f"q{i:05d}", "question": q, "answers": [f"0000-{i:05d}-0"], "kind": "faq"}
                   for i, (q, _) in enumerate(pairs)]
        techdata.write_set(root / techdata.PACKAGES_DIR / name, corpus, queries,
                           {"source": name, "packages": [name], "dropped_queries": {}})
    (root / techdata.SPLIT_FILE).write_text(json.dumps(split))


def test_join_links_units_and_drops_answers_two_builds_share(tmp_path):
    """A unit of the first build wins a name both hold; a query whose answer text a unit of the
    other build also holds is dropped from both, as build() does within one build."""
    shared = "This boilerplate paragraph appears in two packages."
    _build(tmp_path / "a", {"train": ["one", "two"], "dev": [], "test": []},
           {"one": [("How do I start it?", "Run the start command first."), ("Why?", shared)],
            "two": [("What is two?", "Two is the second package here.")]})
    _build(tmp_path / "b", {"train": ["two", "three"], "dev": ["four"], "test": []},
           {"two": [("Other two?", "A different second package.")],
            "three": [("Where is the boilerplate?", shared)],
            "four": [("How do I stop it?", "Run the stop command last.")]})
    summary = techdata.join(tmp_path / "j", [tmp_path / "a", tmp_path / "b"])
    assert summary["units"] == 3 and summary["dropped_shared"] == 2
    assert json.loads((tmp_path / "j" / techdata.SPLIT_FILE).read_text()) == {
        "train": ["one", "two"], "dev": ["four"], "test": []}  # "three" has no query left

    def questions(unit):
        with gzip.open(tmp_path / "j" / techdata.PACKAGES_DIR / unit / "queries.jsonl.gz", "rt") as f:
            return [json.loads(line)["question"] for line in f]

    assert questions("one") == ["How do I start it?"]
    assert not (tmp_path / "j" / techdata.PACKAGES_DIR / "three").exists()
    assert questions("two") == ["What is two?"]  # the first build's unit
    assert (tmp_path / "j" / techdata.PACKAGES_DIR / "four").is_symlink()


def test_natural_set_keeps_faq_questions_over_their_whole_documents(tmp_path):
    """Only FAQ and HOWTO questions, every sentence of the documents that answer them (not of the
    others), ids UNIT:ID; --without leaves out an earlier build's units of the split."""
    _build(tmp_path / "old", {"train": [], "dev": ["one"], "test": []},
           {"one": [("How do I start it?", "Run the start command first.")]})
    _build(tmp_path / "b", {"train": ["zero"], "dev": ["one", "two"], "test": []},
           {"zero": [("Is it trained on?", "Yes, it is a train unit.")],
            "one": [("How do I start it?", "Run the start command first.")],
            "two": [("How do I stop it?", "Run the stop command last."), ("Where is it?", "It is here.")]})
    folder = tmp_path / "b" / techdata.PACKAGES_DIR / "two"
    rows = list(reqa.read_jsonl(folder / "queries.jsonl.gz"))
    rows[1]["kind"] = "heading"  # a heading is no natural question
    corpus = list(reqa.read_jsonl(folder / "corpus.jsonl.gz"))
    corpus.append({"id": "0001-00000-0", "text": "Another document.", "passage": "0001-00000", "position": 0})
    techdata.write_set(folder, corpus, rows, {"source": "two", "packages": ["two"], "dropped_queries": {}})

    counts = naturalset.natural_set(tmp_path / "b", tmp_path / "all")
    assert counts == {"sentences": 3, "queries": 2, "documents": 2, "per_kind": {"faq": 2}}
    ds = reqa.load(tmp_path / "all")
    assert [q for _, q, _ in ds.queries] == ["How do I start it?", "How do I stop it?"]
    assert ds.ids == ["one:0000-00000-0", "two:0000-00000-0", "two:0000-00001-0"]  # not two's other document
    assert ds.queries[1][2] == ["two:0000-00000-0"]

    naturalset.natural_set(tmp_path / "b", tmp_path / "new", without=tmp_path / "old")
    assert [q for _, q, _ in reqa.load(tmp_path / "new").queries] == ["How do I stop it?"]
