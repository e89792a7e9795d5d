"""`sparc-local adapt` end to end: tiny models with an MLM head, real files, a real SQLite index."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from sparc_lab.adapt_rules import rows_by_rule
from sparc_local.adapt import domain
from sparc_local.adapt.model_folder import load_adapt_weights
from sparc_local.adapt.run import LOSS_WINDOW, AdaptOptions, adapt
from sparc_local.cli.app import app
from sparc_local.index.store import Index
from sparc_local.model.export import QUANT_DYNAMIC
from sparc_local.model.folder import load_encoder_weights
from sparc_local.model.info import ModelInfo, load_tokenizer
from tests.tiny import WORDS, make_tiny_adapt_model, make_tiny_model, tiny_vocab, tiny_weights

runner = CliRunner()


@pytest.fixture(scope="session")
def tiny_adapt_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("adapt-model") / "tiny"
    make_tiny_adapt_model(folder)
    return folder


@pytest.fixture(autouse=True)
def active_tiny_adapt(sparc_home: Path, tiny_adapt_dir: Path) -> Path:
    (sparc_home / "active-model").write_text(str(tiny_adapt_dir))
    return tiny_adapt_dir


_TEA = {"tea", "green", "black", "steep", "minutes", "water", "boil", "cup"}  # only tea.md says these


def _sentences(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    words = [w for w in WORDS if len(w) > 2 and w not in _TEA]
    return [" ".join(rng.choice(words, size=int(rng.integers(5, 12)))).capitalize() + "." for _ in range(n)]


@pytest.fixture
def adapt_docs(tmp_path: Path) -> Path:
    """Four files, 130+ sentences in paragraphs, one known answer."""
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(4):
        sents = _sentences(32, seed=i)
        paras = [" ".join(sents[j:j + 4]) for j in range(0, len(sents), 4)]
        (root / f"doc{i}.txt").write_text("\n\n".join(paras) + "\n")
    (root / "tea.md").write_text("# Tea\n\nGreen tea should steep for three minutes. Then drink it.\n\n"
                                 "Boil the water first.\n")
    return root


def run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def _status() -> dict:
    r = run("status", "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def _token_postings(db: Path, token: int) -> dict[int, int]:
    """{sentence text: stored weight} of one token (sentence ids change on re-encoding, texts do not)."""
    with Index(db) as idx:
        plist = idx.postings([token])
        out = {}
        for _, ids, q in plist:
            for row, w in zip(idx.sentences(ids), q.tolist()):
                out[row.text] = w
        return out


def _content(db: Path) -> bytes:
    """The database file's bytes, except the header's change counters (offsets 24 and 92).

    Opening any Index bumps them (store.py runs PRAGMA auto_vacuum on every open), even for a
    reader; every other byte must be untouched by an interrupted adapt.
    """
    data = bytearray(db.read_bytes())
    data[24:28] = data[92:96] = b"\0\0\0\0"
    return bytes(data)


# ---------------------------------------------------------------- reading weights back

def _adapted_E(info: ModelInfo) -> np.ndarray:
    """The E of an adapted model (it replaces both the input embeddings and the projection)."""
    return load_encoder_weights(info)[1]["emb.word"]


@pytest.mark.parametrize("layout", ["bert", "distilbert"])
@pytest.mark.parametrize("int8", [False, True, QUANT_DYNAMIC])
def test_load_encoder_weights_round_trip(tmp_path: Path, layout: str, int8: bool | str) -> None:
    """Adapt and re-export read the weights back, also from onnxruntime's int8 kernels (Q, K and V
    joined into its integer attention, QAttention)."""
    info = make_tiny_model(tmp_path / "m", layout=layout, int8=bool(int8), quant=int8 if isinstance(int8, str) else None)
    if int8 == QUANT_DYNAMIC:
        import onnx

        assert "QAttention" in {n.op_type for n in onnx.load(str(info.onnx_path)).graph.node}
    cfg, w = load_encoder_weights(info)
    cfg0, w0 = tiny_weights(layout, len(tiny_vocab()))
    assert cfg == cfg0
    w0 = {k: v for k, v in w0.items() if not k.startswith("mlm.")}
    assert set(w) == set(w0)
    for k in w0:
        assert w[k].dtype == np.float32 and w[k].shape == w0[k].shape, k
        if int8:  # int8 weights: within half a quantization step of their tensor's (or E's row's) max
            tol = np.abs(w0[k]).max(axis=-1, keepdims=True) if k == "emb.word" else np.abs(w0[k]).max()
            assert np.all(np.abs(w[k] - w0[k]) <= tol / 127 * 0.5 + 1e-7), k
        else:
            assert np.array_equal(w[k], w0[k]), k


def test_adapt_weights_need_a_head(tmp_path: Path) -> None:
    from sparc_local.model.folder import ModelFolderError

    info = make_tiny_model(tmp_path / "nohead")
    with pytest.raises(ModelFolderError, match="no MLM head"):
        load_adapt_weights(info)
    info = make_tiny_adapt_model(tmp_path / "head", layout="distilbert")
    cfg, w, meta = load_adapt_weights(info)
    assert meta["encoder"] == "model" and w["mlm.bias"].dtype == np.float32 and "emb.type" not in w


# ---------------------------------------------------------------- the command

def test_adapt_end_to_end_then_revert(adapt_docs: Path, sparc_home: Path, tiny_adapt_dir: Path) -> None:
    assert run("index", str(adapt_docs), "-q").exit_code == 0
    before = _status()
    base_id = ModelInfo.load(tiny_adapt_dir).id
    assert before["active_model"] == before["model"] == base_id
    tea = tiny_vocab().index("tea")
    postings_before = _token_postings(sparc_home / "index.db", tea)
    reader = Index(sparc_home / "index.db")  # a reader that had the old database open throughout

    r = run("adapt", "--steps", "3", "--seed", "1", "--lr", "0.01")  # big steps: weights visibly change
    assert r.exit_code == 0, r.output
    assert "re-encoded" in r.output
    after = _status()
    assert after["active_model"] != base_id
    assert after["model"] == after["active_model"]  # the index was re-encoded with it
    assert after["sentences"] == before["sentences"] and after["files"] == before["files"]
    pointer = Path((sparc_home / "active-model").read_text().strip())
    assert pointer.parent == sparc_home / "models" and pointer.name.startswith("tiny-bert-adapted-")
    new = ModelInfo.load(pointer)
    assert new.id == after["active_model"]
    assert new.extra["adapted_from"]["id"] == base_id and new.extra["adapt"]["steps"] == 3
    assert new.extra["adapt"]["corpus_sentences"] == before["sentences"]
    E_old = load_encoder_weights(ModelInfo.load(tiny_adapt_dir))[1]["emb.word"]
    E_new = _adapted_E(new)
    assert not np.array_equal(E_old, E_new) and np.abs(E_new - E_old).max() < 0.1  # 3 Adam steps of ~0.01
    assert not list((sparc_home / "adapt").glob("ckpt-*"))  # checkpoint removed once switched
    assert not list(sparc_home.glob("index.db.adapting*"))
    # the open reader now sees the new database, intact
    assert reader.get_meta("model") == new.id and reader.verify() == []
    reader.close()
    # answers come from the re-encoded index: new weights (and top-K sets) for the same sentences
    postings_after = _token_postings(sparc_home / "index.db", tea)
    assert postings_after != postings_before
    assert "Green tea should steep for three minutes." in postings_after.keys() & postings_before.keys()
    r = run("ask", "green tea steep", "--json", "-k", "2")
    assert r.exit_code == 0, r.output
    answers = json.loads(r.output)
    assert answers[0]["sentence"] == "Green tea should steep for three minutes."
    assert "another model" not in r.output

    r = run("adapt", "--revert")
    assert r.exit_code == 0, r.output
    assert "Reverted to " + base_id in r.output
    reverted = _status()
    assert reverted["active_model"] == reverted["model"] == base_id
    assert Path((sparc_home / "active-model").read_text().strip()) == tiny_adapt_dir.resolve()
    assert not pointer.exists()  # the adapted version is deleted
    assert _token_postings(sparc_home / "index.db", tea) == postings_before
    r = run("adapt", "--revert")
    assert r.exit_code == 0 and "nothing to revert" in r.output


def test_adapt_trains_only_the_rows_of_the_corpus_tokens(adapt_docs: Path, sparc_home: Path, tiny_adapt_dir: Path) -> None:
    """A model without its training text's counts (so the default own rule falls back to the
    corpus's tokens): rows of E of tokens the indexed sentences never use, and of the special
    tokens, keep their values; the lab's "all" rule (SPARC §5.1 as published) moves them too."""
    assert run("index", str(adapt_docs), "-q").exit_code == 0
    r = run("adapt", "--steps", "3", "--seed", "1", "--lr", "0.01", "-q")
    assert r.exit_code == 0, r.output
    vocab = tiny_vocab()
    E_old = load_encoder_weights(ModelInfo.load(tiny_adapt_dir))[1]["emb.word"]
    corpus_rule = ModelInfo.load(Path((sparc_home / "active-model").read_text().strip()))
    assert corpus_rule.extra["adapt"]["rows"] == "corpus"
    moved = np.any(_adapted_E(corpus_rule) != E_old, axis=1)
    in_docs = ["tea", "steep", "the", "piano", "."]
    never = ["[CLS]", "[SEP]", "[MASK]", "[UNK]", "?", "!", "##q", "7"]  # no doc has these
    assert all(moved[vocab.index(t)] for t in in_docs)
    assert not any(moved[vocab.index(t)] for t in never)
    counts = np.zeros(len(vocab), np.int64)
    counts[[vocab.index(t) for t in in_docs]] = 1
    assert rows_by_rule("all", counts) is None
    assert rows_by_rule("corpus", counts).tolist() == sorted(vocab.index(t) for t in in_docs)


def test_adapt_reports_the_mean_loss_of_its_first_and_last_steps(adapt_docs: Path, sparc_home: Path) -> None:
    """One batch's MLM loss is noisy: the result (and `adapt`'s line) gives the means of the run's
    first and last LOSS_WINDOW steps."""
    assert run("index", str(adapt_docs), "-q").exit_code == 0
    losses: list[float] = []
    with Index(sparc_home / "index.db") as idx:
        r = adapt(idx, AdaptOptions(steps=LOSS_WINDOW + 5, seed=1, lr=0.01),
                  on_progress=lambda ph, d, t, loss: losses.append(loss) if loss is not None else None)
    assert len(losses) == LOSS_WINDOW + 5
    assert r.first_loss == pytest.approx(np.mean(losses[:LOSS_WINDOW]))
    assert r.last_loss == pytest.approx(np.mean(losses[5:]))
    assert r.first_loss != r.last_loss
    assert r.model.extra["adapt"]["first_loss"] == r.first_loss


def test_forgotten_file_stays_forgotten_after_adapt(adapt_docs: Path, sparc_home: Path) -> None:
    """adapt's re-encode builds a new database: the forgotten paths go with it, so a later
    `index` still keeps the file out."""
    private = adapt_docs / "private.txt"
    private.write_text("The school piano key is under the green book.\n")
    assert run("index", str(adapt_docs), "-q").exit_code == 0
    assert run("forget", str(private)).exit_code == 0
    files = _status()["files"]
    assert run("adapt", "--steps", "2", "-q").exit_code == 0
    assert run("index", "-q").exit_code == 0
    assert _status()["files"] == files
    with Index(sparc_home / "index.db") as idx:
        assert idx.forgotten() == [str(private)] and idx.file(str(private)) is None


def test_interrupted_adapt_changes_nothing_and_resumes(adapt_docs: Path, sparc_home: Path, tiny_adapt_dir: Path) -> None:
    assert run("index", str(adapt_docs), "-q").exit_code == 0
    db = sparc_home / "index.db"
    db_bytes = _content(db)
    pointer = (sparc_home / "active-model").read_text()
    opts = AdaptOptions(steps=5, checkpoint_every=1, seed=3)

    def stop_after_2(phase: str, done: int, total: int, loss: float | None) -> None:
        if phase == "train" and done == 2:
            raise KeyboardInterrupt

    with Index(db) as idx, pytest.raises(KeyboardInterrupt):
        adapt(idx, opts, on_progress=stop_after_2)
    assert _content(db) == db_bytes
    assert (sparc_home / "active-model").read_text() == pointer
    assert not (sparc_home / "models").exists() or not list((sparc_home / "models").iterdir())
    assert len(list((sparc_home / "adapt").glob("ckpt-*.npz"))) == 1

    seen: list[int] = []
    with Index(db) as idx:
        result = adapt(idx, opts, on_progress=lambda ph, d, t, loss: seen.append(d) if ph == "train" else None)
    assert result.resumed_from == 2 and seen == [2, 3, 4, 5]
    assert ModelInfo.load(Path((sparc_home / "active-model").read_text().strip())).id == result.model.id

    # resuming gives the same E as an uninterrupted run (same seed, same corpus)
    E_resumed = load_encoder_weights(result.model)[1]["emb.word"]
    assert run("adapt", "--revert", "-q").exit_code == 0
    with Index(db) as idx:
        straight = adapt(idx, opts)
    assert np.array_equal(load_encoder_weights(straight.model)[1]["emb.word"], E_resumed)


def test_training_batches_are_unpadded_sentences(adapt_docs: Path, sparc_home: Path, tmp_path: Path) -> None:
    """"[CLS] sentence [SEP]", padded only to the batch's longest, even if tokenizer.json pads (MiniLM's does)."""
    info = make_tiny_adapt_model(tmp_path / "padded")
    spec = json.loads(info.tokenizer_path.read_text())
    spec["padding"] = {"strategy": {"Fixed": 40}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                       "pad_type_id": 0, "pad_token": "[PAD]"}
    info.tokenizer_path.write_text(json.dumps(spec))
    (sparc_home / "active-model").write_text(str(info.path))
    assert run("index", str(adapt_docs), "-q").exit_code == 0
    from sparc_local.adapt.run import token_batches
    from sparc_local.model.info import load_tokenizer

    with Index(sparc_home / "index.db") as idx:
        ids = idx.live_sentence_ids()
        it = token_batches(idx, ids, load_tokenizer(info.tokenizer_path), info, 16, 64, seed=0)
        seen = [next(it) for _ in range(4)]
        again = token_batches(idx, ids, load_tokenizer(info.tokenizer_path), info, 16, 64, seed=0)
        assert all(np.array_equal(next(again).ids, b.ids) for b in seen)  # deterministic: resume replays it
    assert len(seen) == 4
    for b in seen:
        n = b.attention_mask.sum(1)
        assert n.max() == b.ids.shape[1] < 20  # 5-12 words + [CLS]/[SEP]: no fixed-length padding
        rows = np.arange(len(n))
        assert (b.ids[:, 0] == info.cls_id).all() and (b.ids[rows, n - 1] == info.sep_id).all()
        assert (b.ids[b.attention_mask == 0] == 0).all() and (b.ids[b.attention_mask == 1] != 0).all()
        assert b.special_mask[:, 0].all() and b.special_mask[rows, n - 1].all()


def test_adapt_empty_index_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run("index", str(empty), "-q").exit_code == 0
    r = run("adapt", "--steps", "2")
    assert r.exit_code == 1
    assert r.output == "Error: the index has no sentences to adapt to\nRun `sparc-local index FOLDER` first.\n"


def test_adapt_small_index_and_no_index(tmp_path: Path) -> None:
    r = run("adapt")
    assert r.exit_code == 1 and r.output.startswith("Error: there is no index yet\n")
    small = tmp_path / "small"
    small.mkdir()
    (small / "a.txt").write_text("Green tea should steep for three minutes. Boil the water first.\n")
    assert run("index", str(small), "-q").exit_code == 0
    r = run("adapt")
    assert r.exit_code == 1
    assert r.output.startswith("Error: the index has only 2 sentences; adapt needs at least 100\n")
    assert "sparc-local index FOLDER" in r.output.splitlines()[1]


def test_distance_counts_the_share_of_the_corpus_own_tokens() -> None:
    """Own tokens: seen >= MIN_COUNT times and >= RATIO times more frequent than in the reference
    (add-one smoothed)."""
    reference = np.array([900, 89, 0, 0, 0])  # smoothed: 901, 90, 1, 1, 1 of 994
    counts = np.array([50, 10, 36, 4, 0])  # of 100: token 2 is 36 / (1/995) ~ 358x, token 3 too rare
    d = domain.distance(counts, reference)
    assert (d.share, d.own_tokens, d.far) == (0.36, 1, True)
    counts[1] = 100  # token 1: 100/190 of the corpus against 90/994: 5.8x, not its own
    d = domain.distance(counts, reference)
    assert d.own_tokens == 1 and d.share == pytest.approx(36 / 190) and not d.far
    assert domain.distance(np.zeros(5, np.int64), reference) == domain.Distance(0.0, 0)


def test_the_own_row_rule_trains_only_the_corpus_own_tokens() -> None:
    """Of the corpus's tokens, only those the domain gate counts as its own; without the training
    text's counts, or without one own token, the corpus's tokens (and the rule says which)."""
    from sparc_local.adapt.run import AdaptError, trainable_rows

    reference = np.array([0, 900, 89, 0, 0, 5])
    counts = np.array([0, 50, 10, 36, 4, 0])  # token 3 is its own; 1 and 2 are the training text's, 4 too rare
    rule, rows = trainable_rows(counts, reference)
    assert (rule, rows.tolist()) == ("own", [3])
    rule, rows = trainable_rows(counts, None)
    assert (rule, rows.tolist()) == ("corpus", [1, 2, 3, 4])
    rule, rows = trainable_rows(np.array([0, 50, 10, 0, 4, 0]), reference)
    assert (rule, rows.tolist()) == ("corpus", [1, 2, 4])
    assert rows_by_rule("own", counts, reference).tolist() == [3]
    assert rows_by_rule("all", counts, reference) is None
    with pytest.raises(AdaptError, match="unknown row rule 'some'"):
        rows_by_rule("some", counts)


def test_adapt_trains_only_the_own_rows_when_the_model_ships_its_training_counts(
        adapt_docs: Path, sparc_home: Path, tmp_path: Path) -> None:
    """With a reference of punctuation only, every word the documents use 5 times or more is their
    own: exactly those rows move, and the rarer words' rows keep their values."""
    info = _with_reference(tmp_path, None)
    (sparc_home / "active-model").write_text(str(info.path))
    assert run("index", str(adapt_docs), "-q").exit_code == 0
    r = run("adapt", "--steps", "3", "--seed", "1", "--lr", "0.01", "-q")
    assert r.exit_code == 0, r.output
    new = ModelInfo.load(Path((sparc_home / "active-model").read_text().strip()))
    assert new.extra["adapt"]["rows"] == "own"
    tok = load_tokenizer(info.tokenizer_path)
    with Index(sparc_home / "index.db") as idx:
        texts = [t for (t,) in idx.conn.execute("SELECT text FROM sentences")]
    counts = domain.count_tokens(tok.encode_batch(texts, add_special_tokens=False), info.vocab_size)
    moved = np.any(_adapted_E(new) != load_encoder_weights(info)[1]["emb.word"], axis=1)
    assert (counts >= domain.MIN_COUNT).sum() > 5 and ((counts > 0) & (counts < domain.MIN_COUNT)).sum() > 0
    np.testing.assert_array_equal(moved, counts >= domain.MIN_COUNT)


def test_a_share_below_the_threshold_never_prints_as_the_threshold() -> None:
    """A corpus at 19.95% was told "20% of their words are their own, adapt needs 20%"."""
    assert [domain.percent(s, 0.20) for s in (0.0, 0.053, 0.194, 0.1995, 0.19999, 0.20, 0.2004, 0.305)] == \
        ["0%", "5%", "19%", "19.9%", "19.9%", "20%", "20%", "30%"]


def _with_reference(tmp_path: Path, adapt_docs: Path | None) -> ModelInfo:
    """A copy of the tiny adapt model whose training text is ``adapt_docs``'s files (None: no text of
    the tiny vocabulary's words, only of its punctuation)."""
    info = make_tiny_adapt_model(tmp_path / "with-reference")
    tok = load_tokenizer(info.tokenizer_path)
    texts = [p.read_text() for p in sorted(adapt_docs.iterdir())] * 50 if adapt_docs else ["! ?"] * 1000
    domain.write_reference(info.path, domain.count_tokens(tok.encode_batch(texts, add_special_tokens=False),
                                                          info.vocab_size), ["test"])
    return info


def test_adapt_declines_sentences_close_to_the_training_text(adapt_docs: Path, sparc_home: Path, tmp_path: Path) -> None:
    info = _with_reference(tmp_path, adapt_docs)
    (sparc_home / "active-model").write_text(str(info.path))
    assert run("index", str(adapt_docs), "-q").exit_code == 0
    before = _content(sparc_home / "index.db")
    r = run("adapt", "--steps", "2")
    assert r.exit_code == 1
    assert r.output == ("Error: your sentences are close to the text the model was trained on: 0% of their words "
                        "are their own, adapt needs 20%\nAdapting would not help them and can cost a little. "
                        "To adapt anyway: `sparc-local adapt --force`.\n")
    assert _content(sparc_home / "index.db") == before and not list((sparc_home / "adapt").glob("ckpt-*"))
    r = run("adapt", "--steps", "2", "--force", "-q")
    assert r.exit_code == 0, r.output
    new = ModelInfo.load(Path((sparc_home / "active-model").read_text().strip()))
    assert new.extra["adapt"]["force"] is True and new.extra["adapt"]["own_share"] == 0.0
    assert new.extra["adapt"]["rows"] == "corpus"  # no own token to train: the corpus's


def test_adapt_goes_ahead_on_sentences_far_from_the_training_text(adapt_docs: Path, sparc_home: Path,
                                                                  tmp_path: Path) -> None:
    (sparc_home / "active-model").write_text(str(_with_reference(tmp_path, None).path))
    assert run("index", str(adapt_docs), "-q").exit_code == 0
    r = run("adapt", "--steps", "2", "-q")
    assert r.exit_code == 0, r.output
    new = ModelInfo.load(Path((sparc_home / "active-model").read_text().strip()))
    assert new.extra["adapt"]["force"] is False and new.extra["adapt"]["own_share"] > 0.9


def test_adapt_piped_says_its_gate_and_progress_in_plain_lines(adapt_docs: Path, sparc_home: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a terminal (a pipe, a log): no live bars, but the gate's share at once and a line per
    tenth of each phase, with the time left (here a clock that ticks one second per update)."""
    from sparc_local.cli.progress import AdaptLines

    (sparc_home / "active-model").write_text(str(_with_reference(tmp_path, None).path))
    assert run("index", str(adapt_docs), "-q").exit_code == 0
    sentences = _status()["sentences"]
    ticks = iter(range(1000))
    monkeypatch.setattr(AdaptLines, "clock", staticmethod(lambda: float(next(ticks))))
    r = runner.invoke(app, ["adapt", "--steps", "3"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    loss = r"loss \d+\.\d{3}"
    share = ModelInfo.load(Path((sparc_home / "active-model").read_text().strip())).extra["adapt"]["own_share"]
    expected = [re.escape(f"Your sentences are far from the text the model was trained on: {share:.0%} of their "
                          "words are their own (adapt needs 20%)."),
                "training: 0 of 3 steps",
                f"training: 1 of 3 steps, {loss}, 0:02 left",
                f"training: 2 of 3 steps, {loss}, 0:01 left",
                f"training: 3 of 3 steps, {loss}",
                "writing the model",
                f"re-encoding: 0 of {sentences} sentences",
                f"re-encoding: {sentences} of {sentences} sentences"]
    lines = r.stderr.splitlines()
    assert len(lines) == len(expected) and all(re.fullmatch(e, x) for e, x in zip(expected, lines)), lines
    assert r.stdout.startswith(f"Adapted tiny-bert to {sentences} sentences in 3 steps")
    assert run("adapt", "--steps", "3", "-q").stderr == ""  # --quiet: not a line


def test_adapt_lines_are_a_tenth_of_a_long_phase_apart() -> None:
    from rich.console import Console

    from sparc_local.cli.progress import AdaptLines

    out = Console(file=(buf := __import__("io").StringIO()), width=200)
    lines = AdaptLines(out)
    for done in range(0, 501):
        lines.update("train", done, 500, None if done == 0 else 3.0)
    shown = buf.getvalue().splitlines()
    assert len(shown) == 11 and shown[0] == "training: 0 of 500 steps" and shown[-1] == "training: 500 of 500 steps, loss 3.000"
    assert all(s.startswith(f"training: {50 * i} of 500 steps") for i, s in enumerate(shown))


def test_adapt_without_head_is_a_clear_error(adapt_docs: Path, sparc_home: Path, tmp_path: Path) -> None:
    (sparc_home / "active-model").write_text(str(make_tiny_model(tmp_path / "nohead").path))
    assert run("index", str(adapt_docs), "-q").exit_code == 0
    r = run("adapt", "--steps", "2")
    assert r.exit_code == 1
    assert r.output.startswith("Error: the model tiny-bert has no MLM head")
    assert len(r.output.splitlines()) == 2


@pytest.mark.parametrize("quant", ["int8-weights", "int8"])
def test_adapt_int8_model(adapt_docs: Path, sparc_home: Path, tmp_path: Path, quant: str) -> None:
    layout = "distilbert"
    base = make_tiny_adapt_model(tmp_path / "int8", layout=layout, quant=quant)
    (sparc_home / "active-model").write_text(str(base.path))
    assert run("index", str(adapt_docs), "-q").exit_code == 0
    r = run("adapt", "--steps", "2", "--batch-size", "8", "-q")
    assert r.exit_code == 0, r.output
    new = ModelInfo.load(Path((sparc_home / "active-model").read_text().strip()))
    assert new.quantization == quant and new.layout == layout
    E0, E1 = load_encoder_weights(base)[1]["emb.word"], _adapted_E(new)
    assert E0.shape == E1.shape and not np.array_equal(E0, E1)
    r = run("ask", "green tea", "--json")
    assert r.exit_code == 0 and json.loads(r.output)


def test_ask_after_adapt_never_imports_adapt(adapt_docs: Path, sparc_home: Path) -> None:
    assert run("index", str(adapt_docs), "-q").exit_code == 0
    assert run("adapt", "--steps", "1", "-q").exit_code == 0
    code = ("import sys; from typer.testing import CliRunner; from sparc_local.cli.app import app; "
            "r = CliRunner().invoke(app, ['ask', 'green tea']); assert r.exit_code == 0, r.output; "
            "print([m for m in sys.modules if m in ('onnxruntime', 'onnx', 'torch') "
            "or m.startswith('sparc_local.adapt')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "SPARC_LOCAL_HOME": str(sparc_home)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- the build-time head trainer

def _fake_reqa(root: Path) -> Path:
    import gzip

    for k, name in enumerate(("squad-train-head", "du2017-train", "wikiqa-train")):
        (root / name).mkdir(parents=True)
        with gzip.open(root / name / "corpus.jsonl.gz", "wt") as fh:
            for j, text in enumerate(_sentences(300, seed=10 + k)):
                fh.write(json.dumps({"id": f"p{j // 5}-{j % 5}", "text": text, "passage": f"p{j // 5}",
                                     "position": j % 5}) + "\n")
    return root


@pytest.mark.parametrize("encoder", ["model", "original"])
def test_head_trainer_writes_a_head_adapt_can_use(tmp_path: Path, encoder: str) -> None:
    pytest.importorskip("torch")
    from safetensors.numpy import save_file

    from sparc_lab.mlm_head import train_head
    from sparc_local.model.folder import ENCODER_FILE
    from tests.tiny import to_checkpoint_names

    data = _fake_reqa(tmp_path / "reqa")
    info = make_tiny_model(tmp_path / "model", int8=True)
    enc_path = info.path
    if encoder == "original":
        cfg, w = tiny_weights("bert", len(tiny_vocab()), seed=5)
        enc_path = tmp_path / "hf"
        enc_path.mkdir()
        save_file({k: np.ascontiguousarray(v) for k, v in to_checkpoint_names(cfg, w).items()},
                  str(enc_path / "model.safetensors"))
        (enc_path / "config.json").write_text(json.dumps({"num_attention_heads": cfg.heads}))
    lines: list[str] = []
    out = train_head(enc_path, info.path, tmp_path / "run", data_dir=data, steps=40, batch=16, lr=1e-2,
                     eval_every=20, n_valid=64, log=lines.append)
    log = [json.loads(x) for x in (tmp_path / "run" / "train.log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [0, 20, 40]
    assert log[-1]["loss"] < log[0]["loss"]  # the head learns
    assert abs(out["numpy"][next(iter(out["numpy"]))] - out["torch"]["loss"]) < 0.01  # numpy MLM agrees
    cfg, w, meta = load_adapt_weights(info)
    assert meta["encoder"].startswith(encoder) and (info.path / ENCODER_FILE).exists() == (encoder == "original")
    if encoder == "original":
        assert np.allclose(w["l0.q.w"], tiny_weights("bert", len(tiny_vocab()), seed=5)[1]["l0.q.w"], atol=1e-3)
    # resumable: a rerun with more steps starts from the checkpoint
    lines.clear()
    train_head(enc_path, info.path, tmp_path / "run", data_dir=data, steps=60, batch=16, lr=1e-2, eval_every=20,
               n_valid=64, log=lines.append)
    assert any("resumed at step 40" in x for x in lines)
