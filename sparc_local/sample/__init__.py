"""A small bundled corpus for `sparc-local demo`.

The sample questions live here, not in a file of the folder: a user who indexes the sample folder
itself gets its documents only, and the question "How often should I descale the kettle?" never
outranks the kettle manual's answer.
"""

from __future__ import annotations

from pathlib import Path

QUESTIONS = ("How long should green tea steep?", "How often should I descale the kettle?",
             "Which tram goes to the castle in Lisbon?")


def sample_dir() -> Path:
    return Path(__file__).resolve().parent


def sample_questions() -> list[str]:
    return list(QUESTIONS)
