import shutil
from pathlib import Path

import numpy as np
import pytest

from sparc_local.model.encoder import Encoder
from sparc_local.model.info import ModelInfo
from sparc_local.model.weights import canonicalize
from tests.tiny import make_tiny_model, random_weights, tiny_weights, to_checkpoint_names

torch = pytest.importorskip("torch")

PARAGRAPHS = [["The green tea was built in Paris.", "The tower is by the river.", "It was built in 1889."],
              ["Steep black tea for 3 minutes."], ["Why?", "Who knows."], ["a " * 80, "long context " * 30]]
SENTENCES = [s for p in PARAGRAPHS for s in p]


@pytest.mark.parametrize("layout", ["bert", "distilbert"])
def test_checkpoint_names_round_trip(layout):
    cfg, w = random_weights(layout)
    cfg2, w2 = canonicalize({("distilbert." if layout == "distilbert" else "bert.") + k: v
                             for k, v in to_checkpoint_names(cfg, w).items()}, heads=cfg.heads)
    assert cfg2 == cfg
    assert set(w2) == set(w)
    assert all(np.array_equal(w[k], w2[k]) for k in w)


def _assert_top_k_of(vectors, f: np.ndarray, info: ModelInfo, k: int = 20) -> None:
    """Each row holds the K largest reference weights f (sentences x vocabulary), as a set (ties aside)."""
    f[:, list(info.skip_ids)] = 0
    for i in range(len(SENTENCES)):
        tok, wt = vectors.row(i)
        assert len(tok) <= k and np.all(wt > 0) and np.all(np.diff(wt) <= 0)
        np.testing.assert_allclose(wt, f[i, tok], rtol=1e-4, atol=1e-5)
        assert wt[-1] >= np.sort(f[i])[::-1][len(tok) - 1] - 1e-5
        assert not set(tok.tolist()) & set(info.skip_ids)


def _assert_positions(vectors, dots: list[np.ndarray], spans: list[tuple[int, int]], tol: float = 1e-4) -> None:
    """Each kept token's position is where its H·e_v is the max (the answer phrase): ``dots[i]``
    (positions x vocabulary) of sentence i, whose tokens are rows spans[i] of it; a token with
    NO_POSITION has its max outside the sentence."""
    from sparc_local.model.sparse import NO_POSITION

    assert vectors.positions is not None and vectors.positions.dtype == np.uint8
    inside = 0
    for i, (a, b) in enumerate(spans):
        tok, _ = vectors.row(i)
        for v, p in zip(tok.tolist(), vectors.row_positions(i).tolist()):
            best = dots[i][:, v].max()
            if p == NO_POSITION:
                assert dots[i][a:b, v].max() <= best + tol and (b - a == len(dots[i]) or
                                                                 np.delete(dots[i][:, v], np.s_[a:b]).max() >= best - tol)
            else:
                inside += 1
                assert 0 <= p < b - a and dots[i][a + p, v] >= best - tol, (i, v, p)
    assert inside > 0


@pytest.mark.parametrize("layout", ["bert", "distilbert"])
def test_onnx_graph_matches_torch_reference(tmp_path, layout):
    """The exported graph computes SPARC Eq. 4 + TopK exactly as the training model does."""
    from sparc_lab.model import TorchEncoder
    from sparc_local.model.inputs import pad_batch, paragraph_inputs, sentence_span
    info = make_tiny_model(tmp_path / "m", layout=layout, top_k=20)
    enc = Encoder(info, threads=1, token_budget=64)  # small budget: several length buckets
    vectors = enc.encode(PARAGRAPHS)
    assert len(vectors) == len(SENTENCES)

    cfg, w = tiny_weights(layout, info.vocab_size)
    ref = TorchEncoder(cfg, w).eval()
    with torch.no_grad():
        ref.sparsity.fill_(0.5)
        items = paragraph_inputs(enc.tokenizer, PARAGRAPHS, info.inputs)
        ids, types, mask = (torch.from_numpy(a) for a in pad_batch(items))
        hidden = ref(ids, types, mask)
        f = ref.token_scores(hidden, mask, torch.arange(info.vocab_size)).numpy()
        dots = torch.einsum("bld,vd->blv", hidden * mask.unsqueeze(-1), ref.word).numpy()
    _assert_top_k_of(vectors, f, info)
    # positions over the whole padded input (padding rows are zeros, as in the graph)
    _assert_positions(vectors, list(dots), [sentence_span(item) for item in items])


def test_segment_ids_matter_for_bert_only(tmp_path):
    bert = Encoder(make_tiny_model(tmp_path / "b", "bert"), threads=1)
    with_ctx = bert.encode([["tea", "green tea"]]).row(0)
    without = bert.encode([["tea"]]).row(0)
    assert not np.array_equal(with_ctx[1], without[1])


def test_int8_export_is_smaller_and_close(tmp_path):
    fp = make_tiny_model(tmp_path / "fp", int8=False)
    q = make_tiny_model(tmp_path / "q", int8=True)
    assert q.quantization == "int8-weights" and fp.quantization == "fp32"
    assert q.onnx_path.stat().st_size < fp.onnx_path.stat().st_size
    a = Encoder(fp, threads=1).encode(PARAGRAPHS[:1])
    b = Encoder(q, threads=1).encode(PARAGRAPHS[:1])
    for i in range(2):
        top_a, top_b = set(a.row(i)[0][:10].tolist()), set(b.row(i)[0][:10].tolist())
        assert len(top_a & top_b) >= 6


def test_model_info_round_trip(tmp_path):
    info = make_tiny_model(tmp_path / "m")
    again = ModelInfo.load(tmp_path / "m")
    assert again == info
    assert again.id.startswith("tiny-bert@")


def test_inputs_never_padded_by_the_tokenizer_file(tmp_path):
    """A tokenizer.json with fixed padding (as all-MiniLM-L6-v2's has) must not leak [PAD] into inputs."""
    import json

    from sparc_local.model.info import load_tokenizer
    from sparc_local.model.inputs import InputSpec, paragraph_inputs
    from tests.tiny import write_tokenizer

    path = write_tokenizer(tmp_path / "tok.json")
    raw = json.loads(path.read_text())
    raw["padding"] = {"strategy": {"Fixed": 40}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                      "pad_type_id": 0, "pad_token": "[PAD]"}
    raw["truncation"] = {"max_length": 8, "strategy": "LongestFirst", "stride": 0, "direction": "Right"}
    path.write_text(json.dumps(raw))
    tok = load_tokenizer(path)
    (ids, types), _ = paragraph_inputs(tok, [["green tea", "the tower was built in paris by the river"]],
                                       InputSpec(48, 2, 3))
    assert 0 not in ids.tolist()  # no [PAD]
    assert types.tolist().count(1) == len(tok.encode("the tower was built in paris by the river",
                                                     add_special_tokens=False).ids) + 1
    info = make_tiny_model(tmp_path / "m")
    shipped = json.loads(info.tokenizer_path.read_text())
    assert shipped["padding"] is None and shipped["truncation"] is None


def test_per_input_int8_grid_keeps_a_fine_tune_of_an_int8_model(tmp_path):
    """A model fine-tuned from a dequantized int8 model sits within half a step of that model's
    per-output grid: quantized on it again, the fine-tune rounds away; on the per-input grid
    (WEIGHT_AXIS 0) it is kept, and a re-export keeps that grid bit for bit."""
    from sparc_local.model.export import QUANT_WEIGHTS, export_model, quantize_rows, reexport
    from sparc_local.model.folder import load_encoder_weights
    from sparc_local.model.info import WEIGHT_AXIS
    from tests.tiny import write_tokenizer

    cfg, w = tiny_weights("bert", 150)
    w0 = {**w}
    for key in [k for k in w if k.startswith("l") and k.endswith(".w") and w[k].ndim == 2]:
        q, scale = quantize_rows(w[key])
        w0[key] = q * scale[:, None]  # the int8 model's weights, read back
        step = scale[:, None] * np.ones_like(w[key])
        w[key] = w0[key] + np.random.default_rng(1).uniform(-0.3, 0.3, w[key].shape).astype(np.float32) * step
    tok = write_tokenizer(tmp_path / "tok.json")
    got = {}
    for axis in (1, 0):
        info = export_model(cfg, w, tok, tmp_path / f"a{axis}", name="t", source="t", top_k=20, max_length=48,
                            quant=QUANT_WEIGHTS, weight_axis=axis)
        assert info.extra.get(WEIGHT_AXIS, 1) == axis
        got[axis] = load_encoder_weights(info)[1]
    delta = w["l0.ff1.w"] - w0["l0.ff1.w"]

    def kept(axis: int) -> float:  # the share of the fine-tune the export keeps
        return float(((got[axis]["l0.ff1.w"] - w0["l0.ff1.w"]) * delta).sum() / (delta * delta).sum())

    assert kept(1) < 0.1 and kept(0) > 0.5, (kept(1), kept(0))
    again = reexport(tmp_path / "a0", tmp_path / "r0")
    assert again.extra[WEIGHT_AXIS] == 0
    assert all(np.array_equal(got[0][k], v) for k, v in load_encoder_weights(again)[1].items())


def test_reexporting_a_folder_refuses_the_settings_it_would_ignore(tiny_model_dir: Path, tmp_path: Path, capsys):
    """A model folder keeps its own quantization, K and window when exported again: an option that
    asks for another one is an error, not silently dropped; the projection's options are taken."""
    from sparc_local.model import export

    with pytest.raises(SystemExit) as exit_:
        export.main([str(tiny_model_dir), str(tmp_path / "out"), "--quant", "int8", "--max-length=96"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m sparc_local.model.export: error: --quant, --max-length=96: a model folder is re-exported with its own settings; "
        "only --candidates, --rank and --basis change (export its training weights to change the rest)")
    assert not (tmp_path / "out").exists()
    src = tmp_path / "src"
    shutil.copytree(tiny_model_dir, src)
    (src / "reference_counts.npz").write_bytes(b"counts")
    export.main([str(src), str(tmp_path / "out"), "--candidates", "16"])
    assert ModelInfo.load(tmp_path / "out").max_length == ModelInfo.load(tiny_model_dir).max_length
    # the folder's other files are the same tokenizer's and text's: carried over as they are
    assert (tmp_path / "out" / "reference_counts.npz").read_bytes() == b"counts"


def test_reexporting_keeps_the_projection_option_not_given(tmp_path: Path):
    """`--candidates` alone keeps a rank-R folder's rank, and `--rank` alone its candidate count:
    an option not given is the folder's own, not the default (rank 0 is a certified graph)."""
    from sparc_local.model import export
    from sparc_local.model.projection import Projection

    make_tiny_model(tmp_path / "lr", int8=True, top_k=8, projection=Projection(candidates=16, rank=8))
    export.main([str(tmp_path / "lr"), str(tmp_path / "c24"), "--candidates", "24"])
    export.main([str(tmp_path / "lr"), str(tmp_path / "r4"), "--rank", "4"])
    assert Projection.from_extra(ModelInfo.load(tmp_path / "c24").extra) == Projection(candidates=24, rank=8)
    assert Projection.from_extra(ModelInfo.load(tmp_path / "r4").extra) == Projection(candidates=16, rank=4)
