"""The real shipped model, end to end, against golden values (marked slow: deselect with -m 'not slow')."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.cli import app
from sparc_local.modelinfo import ModelInfo, shipped_model_dir

pytestmark = pytest.mark.slow
GOLDEN = Path(__file__).parent / "golden" / "shipped_model.json"


def test_encoder_matches_golden_values():
    from tests.golden.make_golden import golden

    expected = json.loads(GOLDEN.read_text())
    assert ModelInfo.load(shipped_model_dir()).id == expected["model"], (
        "the shipped model changed: run `python tests/golden/make_golden.py` and review the diff")
    got = golden()
    for want, have in zip(expected["rows"], got["rows"]):
        assert have["nnz"] == want["nnz"]
        assert [t for t, _ in have["top"]] == [t for t, _ in want["top"]]
        assert [w for _, w in have["top"]] == pytest.approx([w for _, w in want["top"]], abs=2e-3)


def test_demo_answers_the_sample_question():
    result = CliRunner().invoke(app, ["demo"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    first = lines[lines.index('$ sparc-local ask "How long should green tea steep?" -k 3') + 2]
    assert first.startswith("1. ") and "tea_notes.md" in first
    assert "**Green tea should steep for two to three minutes" in lines[lines.index(first) + 1]
