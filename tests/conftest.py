"""Shared pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def sparc_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point SPARC_LOCAL_HOME at a fresh temp dir so no test reads or writes the real home."""
    home = tmp_path_factory.mktemp("sparc_home")
    monkeypatch.setenv("SPARC_LOCAL_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def first_stage_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ask` without the shipped reranker, in this process and its children: tests of the first stage
    on the tiny model; the reranker's own tests name theirs (test_rerank.py, test_shipped_model.py)."""
    from sparc_local.model.info import NO_RERANKER, RERANKER_VAR

    monkeypatch.setenv(RERANKER_VAR, NO_RERANKER)


@pytest.fixture(autouse=True)
def index_at_the_tests_priority(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """`index`, `watch` and Library calls made in this process keep the test run's own priority.

    At nice 19 and idle I/O (``power.lower``) they get only what every other program on the machine
    leaves: beside a busy job at nice 0, test_hostile's 10,000-message mbox ran over 20 minutes on 2
    cores for ~50 s of CPU. And without the privilege to raise it back, the first such call leaves
    the whole test process at nice 19. The priority itself is test_power.py's, whose tests are marked
    ``low_priority`` and get the real one; commands run as subprocesses lower their own, as for a user."""
    if request.node.get_closest_marker("low_priority") is not None:
        return
    from sparc_local import power

    def unchanged() -> power.Priority:
        return power.Priority(os.getpriority(os.PRIO_PROCESS, 0), None, "unchanged (tests: conftest.py)")

    monkeypatch.setattr(power, "lower", unchanged)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny deterministic model for the session (see tests/tiny.py)."""
    from tests.tiny import make_tiny_model

    folder = tmp_path_factory.mktemp("model") / "tiny"
    make_tiny_model(folder, top_k=48)
    return folder


@pytest.fixture
def active_tiny(sparc_home: Path, tiny_model_dir: Path) -> Path:
    """Make the tiny model the active one; modules opt in with pytest.mark.usefixtures."""
    (sparc_home / "active-model").write_text(str(tiny_model_dir))
    return tiny_model_dir


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """Two small files with known answers (tea steeping, the tower), not indexed."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "tea.md").write_text("# Tea\n\nGreen tea should steep for three minutes. Then drink it.\n\n"
                                 "Boil the water first.\n")
    (root / "city.txt").write_text("Paris is the capital of France. The tower was built in one year.\n")
    return root


@pytest.fixture(scope="session")
def tiny_reranker_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny reranker that prefers passages about a museum (tests/rerank_tiny.py): N 5, alpha 0.5,
    likely from 8.3 on."""
    from tests.rerank_tiny import make_tiny_reranker, steered_weights

    folder = tmp_path_factory.mktemp("reranker") / "tiny-rerank"
    make_tiny_reranker(folder, weights=steered_weights("museum"), n=5, alpha=0.5, likely=8.3)
    return folder
