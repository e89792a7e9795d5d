"""A small bundled corpus for `sparc-local demo`."""

from __future__ import annotations

from pathlib import Path

QUESTIONS_FILE = "QUESTIONS.txt"  # the sample questions, one a line: not a document to index


def sample_dir() -> Path:
    return Path(__file__).resolve().parent


def sample_questions() -> list[str]:
    return [q.strip() for q in (sample_dir() / QUESTIONS_FILE).read_text().splitlines() if q.strip()]
