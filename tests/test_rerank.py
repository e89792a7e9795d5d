"""The reranker (issue 44): its exporter checked against a numpy BERT, its passage text, and `ask`
with it: answers in the reranker's order, `--fast` the first stage's without loading it, a missing
or damaged folder an `Error:` saying what to do, and no reranker installed the first stage as before.
Real files, a real SQLite index, the tiny encoder and a tiny reranker steered to prefer a museum."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from sparc_local.cli.app import app
from sparc_local.ingest.sentences import split_sentences
from sparc_local.model import info as model_info
from sparc_local.model.export import QUANT_DYNAMIC, QUANT_FP32, QUANT_WEIGHTS
from sparc_local.model.graph import quantize_rows
from sparc_local.model.info import RERANKER_VAR
from sparc_local.query.ask import Answer, rerank_input
from sparc_local.rerank import export as rerank_export
from sparc_local.rerank.inputs import rerank_text
from sparc_local.rerank.model import CONFIG_FILE, Reranker, RerankInfo, reranker_remedy
from tests.rerank_tiny import HEAD_W, make_tiny_reranker, reference_logits, tiny_reranker_weights, write_checkpoint
from tests.tiny import write_tokenizer

pytestmark = pytest.mark.usefixtures("active_tiny")

runner = CliRunner()
REPO = Path(__file__).resolve().parent.parent
QUESTION = "the tea tower train river museum"
FILES = {"tea.md": "# Tea\n\nGreen tea should steep for three minutes. Then drink it.\n",
         "history.txt": "The king built the tower in one year.\n",
         "trip.txt": "The train station is by the river.\n",
         "museum.txt": "The museum ticket was for the history of music.\n"}


@pytest.fixture(autouse=True)
def no_shipped_reranker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The tests name their reranker: none is found where the installation would keep one."""
    monkeypatch.delenv(RERANKER_VAR, raising=False)
    monkeypatch.setattr(model_info, "shipped_reranker_candidates", lambda: (tmp_path / "no-a", tmp_path / "no-b"))


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in FILES.items():
        (root / name).write_text(text)
    result = runner.invoke(app, ["index", str(root), "-q"])
    assert (result.exit_code, result.output) == (0, "")
    return root


@pytest.fixture
def reranker(tiny_reranker_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(RERANKER_VAR, str(tiny_reranker_dir))
    return tiny_reranker_dir


def answers(*args: str) -> list[dict]:
    result = runner.invoke(app, ["ask", QUESTION, "--json", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def logits(folder: Path, shown: list[dict]) -> list[float]:
    """The reranker's own scores of answers' passages, as `ask` builds their text."""
    texts = []
    for a in shown:
        heading = a["heading"] or ""
        body = a["context"][len(heading):].strip()
        sentences = [body[i:j] for i, j in split_sentences(body)]
        texts.append(rerank_text(sentences, sentences.index(a["sentence"]), heading))
    return Reranker.load(folder).score(QUESTION, texts).tolist()


# ------------------------------------------------------------------------------------ ask


def test_ask_orders_answers_by_the_rerankers_scores(docs: Path, reranker: Path):
    first = answers("--fast", "-k", "4")
    second = answers("-k", "4")
    assert first[0]["path"] != str(docs / "museum.txt")  # the first stage puts another passage first ...
    assert second[0]["path"] == str(docs / "museum.txt")  # ... the reranker the museum's
    alpha, likely = (RerankInfo.load(reranker).alpha, RerankInfo.load(reranker).likely)
    by_path = {a["path"]: a for a in first}
    top = first[0]["score"]  # the first stage's best: its scores count over it (``fused``)
    expected = [round(logit + alpha * by_path[a["path"]]["score"] / top, 4)
                for a, logit in zip(second, logits(reranker, second))]
    assert [a["score"] for a in second] == pytest.approx(expected, abs=2e-4)
    assert [a["score"] for a in second] == sorted((a["score"] for a in second), reverse=True)
    assert [a["rank"] for a in second] == [1, 2, 3, 4]
    assert [a["first_stage_rank"] for a in second] == [by_path[a["path"]]["rank"] for a in second]
    assert all(a["reranked"] for a in second)
    assert [a["likely"] for a in second] == [a["score"] >= likely for a in second]
    assert {a["sentence"] for a in second} == {a["sentence"] for a in first}
    # the fields of an answer without a reranker, and the two that say which stage placed it
    assert set(second[0]) == set(first[0]) | {"first_stage_rank", "reranked"}


def test_answers_show_the_passages_best_sentence_with_its_phrase(docs: Path, reranker: Path):
    top = answers("-k", "2")
    result = runner.invoke(app, ["ask", QUESTION, "-k", "2"])
    assert (result.exit_code, result.output) == (0, (
        f"1. {docs / 'museum.txt'}:1  score {top[0]['score']:.2f}\n"
        "   The museum ticket was for the history of music.\n"
        f"   phrase: {top[0]['phrase']['text']}\n"
        f"2. {top[1]['path']}:{top[1]['line']}  score {top[1]['score']:.2f}\n"
        f"   {top[1]['context']}\n"))
    assert top[0]["phrase"]["text"]  # the first stage's evidence, on the reranked answer
    explained = runner.invoke(app, ["ask", QUESTION, "-k", "1", "--explain"]).output.splitlines()
    fast = answers("--fast", "-k", "4")
    museum = next(a for a in fast if a["path"] == str(docs / "museum.txt"))
    logit = logits(reranker, top[:1])[0]
    assert explained[3] == (f"   reranker {logit:.2f} + {top[0]['score'] - round(logit, 4):.2f} from the first stage "
                            f"(rank {museum['rank']}); its score {museum['score']:.2f}:")
    assert explained[4].startswith("   = ")


def test_passages_after_the_nth_follow_in_the_first_stages_order(docs: Path, reranker: Path):
    first = answers("--fast", "-k", "4")
    second = answers("-k", "4", "--candidates", "2")
    head, tail = second[:2], second[2:]
    assert [a["reranked"] for a in second] == [True, True, False, False]
    assert sorted(a["first_stage_rank"] for a in head) == [1, 2]
    assert [a["first_stage_rank"] for a in tail] == [3, 4]
    assert [(a["path"], a["score"], a["likely"]) for a in tail] == [(a["path"], a["score"], a["likely"])
                                                                     for a in first[2:]]


def test_a_filter_keeps_its_candidates_inside_the_kept_files(docs: Path, reranker: Path):
    kept = answers("--path", "t*")  # trip.txt and tea.md: not the museum, which the reranker prefers
    assert {Path(a["path"]).name for a in kept} == {"trip.txt", "tea.md"}
    assert all(a["reranked"] for a in kept)


def test_fast_is_the_first_stage_alone(docs: Path, reranker: Path, monkeypatch: pytest.MonkeyPatch):
    fast = runner.invoke(app, ["ask", QUESTION, "--fast"])
    monkeypatch.delenv(RERANKER_VAR)  # no reranker installed: `ask` is the first stage, as before
    assert model_info.reranker_dir() is None
    assert (fast.exit_code, fast.output) == (0, runner.invoke(app, ["ask", QUESTION]).output)
    plain = answers()
    assert "reranked" not in plain[0] and plain == answers("--fast")
    monkeypatch.setenv(RERANKER_VAR, str(docs / "no-such-reranker"))  # --fast never reads it
    assert runner.invoke(app, ["ask", QUESTION, "--fast"]).output == fast.output
    for mode in ("sparc", "bm25"):  # first-stage modes: no reranker either
        assert runner.invoke(app, ["ask", QUESTION, "--mode", mode]).exit_code == 0


@pytest.mark.parametrize("args, why", [(["--fast"], "with --fast"), (["--mode", "bm25"], "in --mode bm25")])
def test_candidates_without_a_reranker_running_is_an_error(docs: Path, reranker: Path, args: list[str], why: str):
    result = runner.invoke(app, ["ask", QUESTION, "--candidates", "3", *args])
    assert (result.exit_code, result.output) == (1, f"Error: --candidates sets the passages the reranker reads, and "
                                                    f"no reranker runs {why}\nLeave out --candidates.\n")


def _imports(*args: str, env: dict[str, str]) -> list[str]:
    """The heavy modules a process that runs the entry point's `ask ARGS` has imported."""
    code = (f"import sys; from sparc_local.cli.entry import main; assert main({['ask', *args]!r}) == 0; "
            "print([m for m in ('onnxruntime', 'tokenizers', 'sparc_local.rerank.model') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={**__import__("os").environ, **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1].replace("'", '"'))


def test_fast_does_not_load_the_reranker(docs: Path, reranker: Path):
    env = {RERANKER_VAR: str(reranker)}
    assert _imports("green tea", "--fast", env=env) == []
    assert _imports("green tea", "--mode", "bm25", env=env) == []
    assert _imports("green tea", env=env) == ["onnxruntime", "tokenizers", "sparc_local.rerank.model"]


def _broken(tmp_path: Path, tiny_reranker_dir: Path, damage: str) -> Path:
    import shutil

    folder = tmp_path / "broken"
    shutil.copytree(tiny_reranker_dir, folder)
    if damage == "model":
        (folder / "model.onnx").write_bytes(b"not a model")
    elif damage == "config":
        (folder / CONFIG_FILE).write_text('{"name": "x", "n": 3}')
    elif damage == "no config":
        (folder / CONFIG_FILE).unlink()
    elif damage == "no tokenizer":
        (folder / "tokenizer.json").unlink()
    return folder


@pytest.mark.parametrize("damage, message", [
    ("missing", "the reranker folder {f} is missing"),
    ("no config", "{f} is not a reranker folder (no rerank.json)"),
    ("config", "{f}/rerank.json is damaged (no 'max_length')"),
    ("model", "{f}/model.onnx is damaged: onnxruntime cannot load it (InvalidProtobuf)"),
    ("no tokenizer", "{f}/tokenizer.json is missing"),
])
def test_a_missing_or_damaged_reranker_is_an_error_that_says_what_to_do(docs: Path, tmp_path: Path,
                                                                        tiny_reranker_dir: Path, damage: str,
                                                                        message: str, monkeypatch):
    folder = tmp_path / "nowhere" if damage == "missing" else _broken(tmp_path, tiny_reranker_dir, damage)
    monkeypatch.setenv(RERANKER_VAR, str(folder))
    result = runner.invoke(app, ["ask", QUESTION])
    remedy = (f"Point {RERANKER_VAR} at a reranker folder exported by sparc-local (rerank.json, model.onnx, "
              f"tokenizer.json), or unset it; `sparc-local ask --fast` answers with the first stage alone meanwhile.")
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", f"Error: {message.format(f=folder)}\n{remedy}\n")
    assert runner.invoke(app, ["ask", QUESTION, "--fast"]).exit_code == 0


def test_the_shipped_reranker_comes_back_with_a_reinstall(tmp_path: Path):
    shipped = tmp_path / "no-a"
    assert model_info.shipped_reranker_candidates()[0] == shipped  # (the fixture's stand-in)
    assert reranker_remedy(shipped).startswith("Reinstall sparc-local; `sparc-local ask --fast` answers")


def test_the_shipped_reranker_is_found_where_the_encoder_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    shipped = tmp_path / "no-b"
    shipped.mkdir()
    assert model_info.reranker_dir() == shipped
    monkeypatch.undo()
    installed, clone = model_info.shipped_reranker_candidates()
    assert (installed.parent.name, clone.parent.name) == ("models", "exported_models")
    assert installed.name == clone.name == model_info.SHIPPED_RERANKER


def test_rerank_keeps_what_scores_above_the_lowest_first_stage_score_shown():
    """A passage's other sentences (and its repeats elsewhere) are listed by the first stage's
    scores: those at least the lowest first-stage score among the answers shown."""
    from sparc_local.query.ask import Answer, rerank

    class Reverse:  # a second stage that puts the first stage's order upside down
        n, alpha, likely = 3, 0.0, 0.5

        def score(self, question: str, texts: list[str]) -> np.ndarray:
            return np.arange(len(texts), dtype=np.float32)

    def a(rank: int, score: float, more: list[float]) -> Answer:
        extra = [Answer(0, s, "/d", None, 1, f"s{s}", "p") for s in more]
        return Answer(rank, score, f"/d/{rank}", None, 1, f"s{score}", f"p{rank}", sentence_id=rank, collapsed=extra)

    ranked = [a(1, 0.9, [0.85, 0.6]), a(2, 0.8, [0.75]), a(3, 0.7, [0.65]), a(4, 0.5, [])]
    shown = rerank("q", ranked, Reverse(), n=3, k=2)
    assert [(x.rank, x.first_stage_rank, x.score, x.reranked, x.likely) for x in shown] == [
        (1, 3, 2.0, True, True), (2, 2, 1.0, True, True)]
    assert [[c.score for c in x.collapsed] for x in shown] == [[], [0.75]]  # at least 0.7, the lowest shown
    ranked = [a(1, 0.9, [0.85, 0.6]), a(2, 0.8, [0.75]), a(3, 0.7, [0.65]), a(4, 0.5, [])]
    shown = rerank("q", ranked, Reverse(), n=2, k=4)  # after the n-th: the first stage's order and scores
    assert [(x.first_stage_rank, x.score, x.reranked) for x in shown] == [
        (2, 1.0, True), (1, 0.0, True), (3, 0.7, False), (4, 0.5, False)]
    assert [[c.score for c in x.collapsed] for x in shown] == [[0.75], [0.85, 0.6], [0.65], []]


# ------------------------------------------------------------------------------------ the model and its text


def test_the_reranker_reads_the_heading_and_the_passages_sentences(docs: Path):
    """As in training: the passage's sentences around the best one, its heading in front; without
    the passage's sentences (Milvus), its context around the sentence stands for them."""
    from sparc_local.index.store import Index
    from sparc_local.paths import db_path

    index = Index(db_path())
    try:
        tea = next(s for s in index.sentences(range(1, 100)) if s.text.startswith("Then drink"))
        passage = index.passage_sentences([tea.id])[tea.id]
        heading = tea.context[:index.heading_ends([tea.id])[tea.id]].strip()
    finally:
        index.close()
    assert (passage, heading) == ((["Green tea should steep for three minutes.", "Then drink it."], 1), "Tea")
    answer = Answer(rank=1, score=1.0, path="tea.md", page=None, line=3, sentence=tea.text, context=tea.context,
                    offset=tea.offset_in_context, heading=heading)
    assert rerank_input(answer, passage) == "Tea — Green tea should steep for three minutes. Then drink it."
    assert rerank_input(answer, None) == rerank_input(answer, passage)


def test_a_batch_scores_each_pair_as_alone(tiny_reranker_dir: Path):
    """Padding to the batch's longest changes no score; a question too long for the text is cut too."""
    r = Reranker.load(tiny_reranker_dir, batch=3)
    texts = ["The museum ticket was for the history of music.", "Tea.", "The king built the tower in one year. " * 3,
             "The train station is by the river.", ""]
    together = r.score(QUESTION, texts)
    alone = np.array([r.score(QUESTION, [t])[0] for t in texts])
    assert np.abs(together - alone).max() < 1e-4
    assert r.score("museum " * 200, texts).shape == (5,)
    assert r.score(QUESTION, []).shape == (0,)


# ------------------------------------------------------------------------------------ the exporter


def _dequantized(w: dict, linear: bool) -> dict:
    """The weights an int8 export computes with: E's rows (and with ``linear`` every linear layer's,
    per output channel) through quantize_rows."""
    out = dict(w)
    for key, value in w.items():
        if key == "emb.word" or (linear and key.endswith(".w") and value.ndim == 2 and key.startswith("l")):
            q, scale = quantize_rows(value)
            out[key] = q.astype(np.float32) * scale[:, None]
    return out


# fp32 and int8-weights compute in float: BERT's logits to float rounding. Dynamic quantization
# rounds activations to 8 bits too, which a 32-wide random model feels far more than MiniLM
# (benchmarks/rerank_speed.py --compare checks its rankings on the real weights): here only a
# bound that another network's values would break, and its integer kernels in the graph.
@pytest.mark.parametrize("quant, tolerance", [(QUANT_FP32, 1e-4), (QUANT_WEIGHTS, 1e-4), (QUANT_DYNAMIC, 1.5)])
def test_exported_logits_are_berts(tmp_path: Path, quant: str, tolerance: float):
    cfg, w = tiny_reranker_weights(seed=3)
    r = Reranker(make_tiny_reranker(tmp_path / "r", quant=quant, weights=(cfg, w)), batch=8)
    texts = ["green tea should steep for three minutes", "the tower", "a b c " * 30, "paris is the capital of france"]
    feed = r.warm()._encode("how long should green tea steep?", texts)
    reference = reference_logits(cfg, w if quant == QUANT_FP32 else _dequantized(w, quant == QUANT_WEIGHTS),
                                 feed["input_ids"], feed["token_type_ids"], feed["attention_mask"])
    got = r._session.run(["logits"], feed)[0]
    assert got.dtype == np.float32 and got.shape == (4,)
    assert np.abs(got - reference).max() < tolerance
    import onnx

    ops = {n.op_type for n in onnx.load(str(r.info.onnx_path)).graph.node}
    assert ("MatMulInteger" in ops) == ("QAttention" in ops) == (quant == QUANT_DYNAMIC)
    assert ("DequantizeLinear" in ops) == (quant == QUANT_WEIGHTS)


def test_the_exporter_writes_the_folder_ask_reads(tmp_path: Path, capsys: pytest.CaptureFixture):
    cfg, w = tiny_reranker_weights()
    ckpt = write_checkpoint(tmp_path / "rerank.npz", cfg, w)
    tok = write_tokenizer(tmp_path / "tokenizer.json")
    out = tmp_path / "rerank-tiny"
    rerank_export.main([str(ckpt), str(out), "--name", "rerank-tiny", "--tokenizer", str(tok), "--alpha", "1.5",
                        "--likely", "2.5", "--n", "20", "--max-length", "40", "--int8"])
    assert capsys.readouterr().out == (f"exported rerank-tiny ({rerank_export.INT8}, N=20, max_length=40) to {out}\n")
    assert sorted(p.name for p in out.iterdir()) == ["model.onnx", "rerank.json", "tokenizer.json"]
    config = json.loads((out / CONFIG_FILE).read_text())
    assert {k: config[k] for k in ("name", "max_length", "n", "alpha", "likely", "source")} == {
        "name": "rerank-tiny", "max_length": 40, "n": 20, "alpha": 1.5, "likely": 2.5, "source": str(ckpt)}
    assert config["quantization"] == rerank_export.INT8
    assert RerankInfo.load(out) == RerankInfo("rerank-tiny", out, 40, 20, 1.5, 2.5, str(ckpt))
    assert Reranker.load(out).score(QUESTION, ["the museum"]).shape == (1,)


def test_a_checkpoint_without_its_head_is_refused(tmp_path: Path):
    cfg, w = tiny_reranker_weights()
    del w[HEAD_W]
    with pytest.raises(ValueError, match="has no head.w: not a reranker"):
        rerank_export.load_checkpoint(write_checkpoint(tmp_path / "c.npz", cfg, w))
    cfg, w = tiny_reranker_weights()
    with pytest.raises(ValueError, match="more than the model's 64 positions"):
        rerank_export.export_reranker(cfg, w, write_tokenizer(tmp_path / "t.json"), tmp_path / "o", name="x",
                                      source="", max_length=65)


def test_eval_reports_what_ask_shows_by_both_stages_paired(tmp_path: Path, tiny_model_dir: Path, reranker: Path):
    from tests.test_fusion import _tea_set

    dataset = _tea_set(tmp_path)
    result = runner.invoke(app, ["eval", str(dataset), "--model", str(tiny_model_dir), "--json"])
    assert result.exit_code == 0, result.output
    stages = json.loads(result.stdout)["stages"]
    assert stages["paired"]["mean"] == pytest.approx(stages["reranked"]["mrr@10"] - stages["passages"]["mrr@10"])
    assert stages["paired_hit1"]["mean"] == pytest.approx(stages["reranked"]["r@1"] - stages["passages"]["r@1"])
    fast = runner.invoke(app, ["eval", str(dataset), "--model", str(tiny_model_dir), "--json", "--fast"])
    assert fast.exit_code == 0 and "stages" not in json.loads(fast.stdout)
    shown = runner.invoke(app, ["eval", str(dataset), "--model", str(tiny_model_dir)])
    assert "  reranked - first stage: MRR@10 " in shown.output


def test_eval_gives_each_stages_rank_of_every_question_asked_for_paired_model_comparisons(
        tmp_path: Path, tiny_model_dir: Path, reranker: Path):
    from sparc_local.app import run
    from sparc_local.app.jobs import EvalRequest
    from sparc_local.evaluation.metrics import mrr
    from tests.test_fusion import _tea_set

    request = EvalRequest(str(_tea_set(tmp_path)), model=str(tiny_model_dir), hits=True, sample=1)
    stages = run.evaluate(request, run.eval_model(request))["stages"]
    for stage in ("passages", "reranked"):
        ranks = stages["hits"][stage]
        assert len(ranks) == stages["questions"] == 1
        assert mrr(list(ranks.values())) == pytest.approx(stages[stage]["mrr@10"])
