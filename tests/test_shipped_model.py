"""The real shipped model, end to end, against golden values (marked slow: deselect with -m 'not slow')."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.cli.app import app
from sparc_local.model.info import ModelInfo, shipped_model_dir

pytestmark = pytest.mark.slow
GOLDEN = Path(__file__).parent / "golden" / "shipped_model.json"


def test_encoder_matches_golden_values():
    from tests.golden.make_golden import compare, golden

    expected = json.loads(GOLDEN.read_text())
    assert ModelInfo.load(shipped_model_dir()).id == expected["model"], (
        "the shipped model changed: run `python tests/golden/make_golden.py` and review the diff")
    got = golden()
    assert all(r == 0 for r in got["ranks"]), got["ranks"]  # every sample answer ranks first
    assert compare(expected, got) == []


@pytest.mark.parametrize("change", ["int8 kernels", "one LayerNorm 1% off"])
def test_golden_check_fails_when_the_model_changes(tmp_path, change):
    """The check is not so loose that it passes a different model or export."""
    from sparc_local.model.export import QUANT_DYNAMIC, QUANT_WEIGHTS, export_model
    from sparc_local.model.folder import load_encoder_weights
    from tests.golden.make_golden import compare, golden

    info = ModelInfo.load(shipped_model_dir())
    cfg, w = load_encoder_weights(info)
    quant = QUANT_DYNAMIC if change == "int8 kernels" else QUANT_WEIGHTS
    if change == "one LayerNorm 1% off":
        w[f"l{cfg.layers - 1}.ln2.w"] = w[f"l{cfg.layers - 1}.ln2.w"] * 1.01
    other = export_model(cfg, w, info.tokenizer_path, tmp_path / "m", name=info.name, source="test",
                         sparsity_w=info.sparsity_w, top_k=info.top_k, max_length=info.max_length, quant=quant,
                         inputs={"context_sentences": info.context_sentences, "context_order": info.context_order})
    assert len(compare(json.loads(GOLDEN.read_text()), golden(other.path))) > 0


def test_demo_answers_the_sample_question(monkeypatch):
    from sparc_local.model.info import RERANKER_VAR, reranker_dir

    monkeypatch.delenv(RERANKER_VAR)  # the shipped reranker, as a user runs the demo
    assert reranker_dir() is not None
    result = CliRunner().invoke(app, ["demo"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    first = lines[lines.index('$ sparc-local ask "How long should green tea steep?" -k 3') + 2]
    assert first.startswith("1. ") and "tea_notes.md" in first
    # plain text; the heading leads its section's context, set apart
    assert lines[lines.index(first) + 1].startswith("   Brewing guide — Green tea should steep for two to three minutes")
