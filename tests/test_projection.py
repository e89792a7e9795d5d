"""The candidate projection (model/projection.py) against the full one, on the tiny model."""

import numpy as np
import onnx
import pytest

from sparc_local.model.encoder import Encoder
from sparc_local.model.inputs import pad_batch, paragraph_inputs
from sparc_local.model.projection import CANDIDATES_INPUT, CERTIFIED, FULL, FULL_PROJECTION, Projection
from tests.tiny import make_tiny_model

PARAGRAPHS = [["The green tea was built in Paris.", "The tower is by the river.", "It was built in 1889."],
              ["Steep black tea for 3 minutes."], ["Why?", "Who knows."],
              ["The king of France and the queen of London.", "A museum ticket for the train station."]]
K = 8


def rows(vectors) -> list[dict[int, float]]:
    return [dict(zip(*(a.tolist() for a in vectors.row(i)))) for i in range(len(vectors))]


def assert_same(got: list[dict[int, float]], want: list[dict[int, float]]) -> None:
    assert [sorted(r) for r in got] == [sorted(r) for r in want]
    for x, y in zip(got, want):
        assert np.allclose([x[t] for t in sorted(x)], [y[t] for t in sorted(y)], atol=1e-5)


def run_graph(enc: Encoder, candidates: int) -> tuple[list[dict[int, float]], np.ndarray]:
    """The graph's own rows and `certified` flags for PARAGRAPHS, one input per run (no fallback)."""
    got, certified = [], []
    for item in paragraph_inputs(enc.tokenizer, PARAGRAPHS, enc.info.inputs):
        ids, types, mask = pad_batch([item])
        weights, tokens, ok = enc.session.run(["weights", "token_ids", CERTIFIED], {
            "input_ids": ids, "attention_mask": mask, "token_type_ids": types, "top_k": np.array([K]),
            CANDIDATES_INPUT: np.array([candidates])})
        got.append({int(t): float(w) for t, w in zip(tokens[0], weights[0]) if w > 0})
        certified.append(bool(ok[0]))
    return got, np.array(certified)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("projection")
    full = make_tiny_model(folder / "full", int8=True, top_k=K, projection=FULL_PROJECTION)
    cand = make_tiny_model(folder / "cand", int8=True, top_k=K, projection=Projection(candidates=K))
    return full, cand


def test_certified_candidates_give_the_full_projection_and_the_rest_is_encoded_again(models):
    full, cand = models
    want = rows(Encoder(full, threads=1).encode(PARAGRAPHS))
    enc = Encoder(cand, threads=1)
    graph_rows, certified = run_graph(enc, K)
    # K candidates for K slots: some sentences certified, some not, so both checks below can fail
    assert 0 < certified.sum() < len(certified)
    assert_same([r for r, ok in zip(graph_rows, certified) if ok], [r for r, ok in zip(want, certified) if ok])
    assert_same(rows(enc.encode(PARAGRAPHS)), want)
    assert enc.uncertified == len(certified) - certified.sum()  # encoded again with the full projection


def test_candidates_that_cover_every_row_certify_every_sentence(models):
    full, cand = models
    want = rows(Encoder(full, threads=1).encode(PARAGRAPHS))
    graph_rows, certified = run_graph(Encoder(cand, threads=1), 10 * full.vocab_size)  # the candidate branch
    assert certified.all()
    assert_same(graph_rows, want)


def test_the_flag_brings_back_the_full_projection(models):
    full, cand = models
    want = rows(Encoder(full, threads=1).encode(PARAGRAPHS))
    enc = Encoder(cand, threads=1, full_projection=True)
    assert_same(rows(enc.encode(PARAGRAPHS)), want)
    assert enc.uncertified == 0
    graph_rows, certified = run_graph(enc, FULL)  # the graph's full branch: every row, always certified
    assert certified.all()
    assert_same(graph_rows, want)


def test_rows_that_never_score_are_out_of_the_projection(models):
    full, cand = models
    for info in (full, cand):
        graph = onnx.load(str(info.onnx_path)).graph
        keep = next(onnx.numpy_helper.to_array(t) for t in graph.initializer if t.name.startswith("query_vocab"))
        assert len(keep) == info.vocab_size - len(info.skip_ids)
        assert not set(keep.tolist()) & set(info.skip_ids)
        tokens = Encoder(info, threads=1).encode(PARAGRAPHS, top_k=len(keep)).token_ids
        assert len(tokens) and not set(tokens.tolist()) & set(info.skip_ids)


def test_an_fp32_export_keeps_the_full_projection(tmp_path):
    info = make_tiny_model(tmp_path / "m", int8=False, top_k=K, projection=Projection(candidates=K))
    assert Projection.from_extra(info.extra).full
    assert CANDIDATES_INPUT not in {i.name for i in Encoder(info, threads=1).session.get_inputs()}


def test_a_paragraph_seen_before_is_not_encoded_again(models):
    from sparc_local.ingest.sentences import Paragraph

    _, info = models
    alone = rows(Encoder(info, threads=1).encode(PARAGRAPHS))
    enc = Encoder(info, threads=1)
    seen = []
    got = rows(enc.encode(PARAGRAPHS + PARAGRAPHS[:1], progress=seen.append))
    assert got == alone + alone[:3]
    assert enc.memo.reused == 3 and sum(seen) == 8 + 3  # the repeat is counted done, not encoded
    again = rows(enc.encode(PARAGRAPHS[1:2]))
    assert again == alone[3:4] and enc.memo.reused == 4
    assert rows(enc.encode(PARAGRAPHS[1:2], top_k=2)) != again  # K is part of the key
    headed = rows(enc.encode([Paragraph(PARAGRAPHS[1], heading="Brewing guide")]))
    assert enc.memo.reused == 4 and headed != again  # so is the heading, context of every sentence
    assert rows(Encoder(info, threads=1, memo_sentences=0).encode(PARAGRAPHS[:1] * 2)) == alone[:3] * 2


def every_row(info, paragraphs=PARAGRAPHS) -> list[dict[int, float]]:
    """Each sentence's f(v,s) for every vocabulary row that scores, by the full projection."""
    return rows(Encoder(info, threads=1, full_projection=True).encode(paragraphs, top_k=info.vocab_size))


def overlap(got: list[dict[int, float]], want: list[dict[int, float]]) -> float:
    return sum(len(set(a) & set(b)) for a, b in zip(got, want)) / sum(map(len, want))


def test_a_low_rank_estimate_picks_rows_scored_exactly_and_nothing_is_encoded_again(models, tmp_path):
    full, _ = models
    info = make_tiny_model(tmp_path / "r1", int8=True, top_k=K, projection=Projection(candidates=K, rank=1))
    assert Projection.from_extra(info.extra) == Projection(candidates=K, rank=1)
    enc = Encoder(info, threads=1)
    got = rows(enc.encode(PARAGRAPHS))
    assert enc.uncertified == 0  # not certified, never encoded again: every sentence counts as certified
    exact = every_row(full)
    for row, f in zip(got, exact):  # whatever rows it picks, each is scored exactly
        assert np.allclose([row[t] for t in row], [f[t] for t in row], atol=1e-5)
    want = rows(Encoder(full, threads=1).encode(PARAGRAPHS))
    assert overlap(got, want) < 1  # a rank-1 estimate with K candidates misses some of the top K
    graph_rows, certified = run_graph(enc, K)
    assert certified.all() and graph_rows == got


def test_the_low_rank_estimate_follows_embeddings_that_adapt_swaps(models, tmp_path):
    from sparc_local.adapt.model_folder import replace_embeddings
    from sparc_local.model.folder import load_encoder_weights

    full, _ = models
    # full rank: P spans the hidden space, so only quantization separates the estimate from H·Eᵀ
    info = make_tiny_model(tmp_path / "lr", int8=True, top_k=K, projection=Projection(candidates=2 * K, rank=32))
    # new rows for every token the paragraphs do not use: H stays, the top K moves
    E = load_encoder_weights(full)[1]["emb.word"]
    used = {i for item in paragraph_inputs(Encoder(full).tokenizer, PARAGRAPHS, full.inputs) for i in item[0]}
    fresh = np.array([i not in used for i in range(len(E))])
    new_e = E.copy()
    new_e[fresh] = 3 * np.random.default_rng(7).standard_normal((fresh.sum(), E.shape[1])).astype(np.float32)
    swapped_full = make_tiny_model(tmp_path / "full", int8=True, top_k=K, projection=FULL_PROJECTION)
    for m in (info, swapped_full):
        replace_embeddings(m.onnx_path, m.onnx_path, new_e)
    want = rows(Encoder(swapped_full, threads=1).encode(PARAGRAPHS))
    assert overlap(rows(Encoder(full, threads=1).encode(PARAGRAPHS)), want) < 0.5  # an estimate of the old rows would miss
    assert overlap(rows(Encoder(info, threads=1).encode(PARAGRAPHS)), want) >= 0.95


def test_eval_encodes_a_low_rank_model_on_its_own_path(tmp_path):
    """`eval` must score the vectors `index` writes: a low-rank model's candidates pick its top K,
    so its corpus is encoded at the candidate count, not at CACHE_K (where the encoder would run
    the full projection), and the candidate count is part of the model's identity."""
    from sparc_local.evaluation import reqa
    from sparc_local.evaluation.evaluate import CACHE_K, cache_k, encode_corpus
    from sparc_local.model.info import ModelInfo
    from tests.tiny import write_reqa_set

    info = make_tiny_model(tmp_path / "lr", int8=True, top_k=K, projection=Projection(candidates=2 * K, rank=1))
    assert cache_k(info) == 2 * K and cache_k(info, top_k=4 * K) == CACHE_K
    write_reqa_set(tmp_path / "set", seed=3, articles=["a", "b"])
    ds = reqa.load(tmp_path / "set")
    want = rows(Encoder(info, threads=1).encode(ds.paragraphs()))
    assert rows(encode_corpus(ds, tmp_path / "set", info, threads=1).head(K)) == want
    at_full = rows(encode_corpus(ds, tmp_path / "set", info, threads=1, top_k=4 * K).head(K))
    assert at_full != want  # above the candidates the full projection runs: other rows
    other = ModelInfo.load(info.path)
    other.extra["projection"] = Projection(candidates=4 * K, rank=1).to_dict()
    exact = make_tiny_model(tmp_path / "exact", int8=True, top_k=K, projection=Projection(candidates=K))
    assert other.id != info.id and "/" not in exact.id


def test_int8_kernels_keep_one_float_copy_of_e_at_load(tmp_path):
    """onnxruntime's dynamic quantization splits the full projection's Gemm (H·Eᵀ) into
    Transpose(E) and MatMul; loaded as the encoder loads it, that Transpose would be folded into a
    second float E beside the first. The export puts the Gemm back, so a session holds E once."""
    import onnxruntime as ort
    from onnx import numpy_helper

    from sparc_local.model.encoder import session_options
    from sparc_local.model.export import QUANT_DYNAMIC

    info = make_tiny_model(tmp_path / "m", top_k=K, quant=QUANT_DYNAMIC, projection=Projection(candidates=2 * K, rank=8))
    opts = session_options()
    opts.optimized_model_filepath = str(tmp_path / "loaded.onnx")
    ort.InferenceSession(str(info.onnx_path), opts, providers=["CPUExecutionProvider"])

    def floats(graph) -> list[tuple[int, ...]]:
        own = [tuple(t.dims) for t in graph.initializer if numpy_helper.to_array(t).dtype == np.float32]
        return own + [s for n in graph.node for a in n.attribute if a.g.node for s in floats(a.g)]

    whole = info.vocab_size * info.hidden
    assert [s for s in floats(onnx.load(tmp_path / "loaded.onnx").graph) if np.prod(s) == whole] == [(info.vocab_size, info.hidden)]


def top_k_kept(h: np.ndarray, e: np.ndarray, a: np.ndarray, b: np.ndarray, k: int, candidates: int) -> float:
    """Share of each sentence's exact top k (max over its rows of h·eᵀ) among the exact top k of
    the estimate (h·a)(e·b)ᵀ's best ``candidates`` rows, as the graph picks them."""
    kept = []
    for sent in h:
        exact, est = (sent @ e.T).max(0), ((sent @ a) @ (e @ b).T).max(0)
        cand = np.argsort(-est)[:candidates]
        kept.append(len(set(np.argsort(-exact)[:k]) & set(cand[np.argsort(-exact[cand])[:k]])) / k)
    return float(np.mean(kept))


def test_bases_fitted_to_the_hidden_states_keep_more_of_the_top_k_than_e_own_subspace():
    """Hidden states crowd into a few directions E does not favour: fitted to where they lie, a
    rank-r estimate keeps more of the exact top K than E's top singular vectors at the same rank."""
    from sparc_local.model.projection import fitted_bases, low_rank_basis

    rng = np.random.default_rng(11)
    d, r = 48, 8
    e = rng.standard_normal((2000, d)) * np.linspace(2.0, 0.5, d)  # E's energy in its first axes
    mix = np.linalg.qr(rng.standard_normal((d, d)))[0]
    spread = np.r_[np.full(6, 4.0), np.full(d - 6, 0.3)]  # H's in six other directions

    def states(n: int) -> np.ndarray:
        return (rng.standard_normal((n, d)) * spread) @ mix.T

    a, b = fitted_bases(states(4000), e, r)
    p = low_rank_basis(e, r)
    assert a.shape == b.shape == p.shape == (d, r)
    h = states(12 * 40).reshape(40, 12, d)  # 40 sentences of 12 inputs, not the states fitted on
    fitted, own = top_k_kept(h, e, a, b, 16, 64), top_k_kept(h, e, p, p, 16, 64)
    assert fitted > own + 0.2 and fitted > 0.8


def test_a_fitted_estimate_is_exported_kept_on_reexport_and_must_match_the_rank(tmp_path):
    from sparc_local.model import export
    from sparc_local.model.folder import load_encoder_weights
    from sparc_local.model.info import ModelInfo
    from sparc_local.model.projection import BASIS_E, BASIS_H

    rng = np.random.default_rng(5)
    basis = rng.standard_normal((32, 4)).astype(np.float32), rng.standard_normal((32, 4)).astype(np.float32)
    proj = Projection(candidates=2 * K, rank=4)
    info = make_tiny_model(tmp_path / "fit", int8=True, top_k=K, projection=proj, basis=basis)
    plain = make_tiny_model(tmp_path / "plain", int8=True, top_k=K, projection=proj)
    w = load_encoder_weights(info)[1]
    assert np.array_equal(w[BASIS_H], basis[0]) and np.array_equal(w[BASIS_E], basis[1])
    assert BASIS_H not in load_encoder_weights(plain)[1]  # E's own subspace is derived, not stored
    got = rows(Encoder(info, threads=1).encode(PARAGRAPHS))
    assert got != rows(Encoder(plain, threads=1).encode(PARAGRAPHS))  # the bases choose the candidates
    again = export.reexport(info.path, tmp_path / "again")
    assert rows(Encoder(again, threads=1).encode(PARAGRAPHS)) == got
    with pytest.raises(ValueError, match=r"not \(32, 2\): fit them at rank 2"):
        export.main([str(info.path), str(tmp_path / "r2"), "--rank", "2"])
    np.savez(tmp_path / "b2.npz", h=basis[0][:, :2], e=basis[1][:, :2])
    export.main([str(info.path), str(tmp_path / "r2"), "--rank", "2", "--basis", str(tmp_path / "b2.npz")])
    assert load_encoder_weights(ModelInfo.load(tmp_path / "r2"))[1][BASIS_H].shape == (32, 2)
