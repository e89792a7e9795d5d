"""`index` and `watch` as background jobs: low CPU and I/O priority, --threads, no encoding on battery."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local import power
from sparc_local.cli.app import app
from sparc_local.index.store import Index
from sparc_local.model.info import ModelInfo
from sparc_local.watch import daemon
from sparc_local.watch.config import SETTINGS, WatchConfig, WatchProcess, from_json
from sparc_local.watch.watcher import Watcher
from tests.helpers import indexed_paths, wait_until

runner = CliRunner()
pytestmark = [pytest.mark.usefixtures("active_tiny"), pytest.mark.low_priority]  # the real power.lower (conftest.py)
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux priorities")
IDLE = power.IOPRIO_CLASS_IDLE << power.IOPRIO_CLASS_SHIFT


def _can_restore() -> bool:
    return os.geteuid() == 0  # raising the CPU priority back needs privileges


@linux
def test_low_priority_is_inherited_by_later_threads():
    before = (os.getpriority(os.PRIO_PROCESS, 0), power.io_priority())
    seen = {}
    with power.low_priority() as prio:
        assert prio.io_set == "idle" and (prio.nice, prio.io) == before
        assert (os.getpriority(os.PRIO_PROCESS, 0), power.io_priority()) == (power.NICE, IDLE)
        t = threading.Thread(target=lambda: seen.update(nice=os.getpriority(os.PRIO_PROCESS, 0),
                                                        io=power.io_priority()))
        t.start()
        t.join()
    assert seen == {"nice": power.NICE, "io": IDLE}
    if _can_restore():
        assert (os.getpriority(os.PRIO_PROCESS, 0), power.io_priority()) == before


@linux
def test_index_runs_at_low_priority_unless_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import sparc_local.pipeline as indexer

    (tmp_path / "a.txt").write_text("Green tea steeps for three minutes.\n")
    real, seen = indexer.run_index, []

    def spy(*args, **kwargs):
        seen.append((os.getpriority(os.PRIO_PROCESS, 0), power.io_priority()))
        return real(*args, **kwargs)

    monkeypatch.setattr(indexer, "run_index", spy)
    if not _can_restore():
        pytest.skip("would leave this test process at nice 19")
    normal = (os.getpriority(os.PRIO_PROCESS, 0), power.io_priority())
    assert runner.invoke(app, ["index", str(tmp_path), "-q"]).exit_code == 0
    assert runner.invoke(app, ["index", str(tmp_path), "-q", "--normal-priority"]).exit_code == 0
    assert seen == [(power.NICE, IDLE), normal]


@linux
def test_threads_cap_the_encoder(tiny_model_dir: Path):
    """onnxruntime starts threads - 1 pool threads: --threads 1 adds none, 2 adds one."""
    from sparc_local.model.encoder import Encoder

    info = ModelInfo.load(tiny_model_dir)

    def added(threads: int) -> int:
        before = len(os.listdir("/proc/self/task"))
        enc = Encoder(info, threads=threads)
        enc.encode([["Green tea steeps."]])
        n = len(os.listdir("/proc/self/task")) - before
        del enc
        return n

    assert (added(1), added(2)) == (0, 1)


def _supply(root: Path, name: str, **files: str) -> None:
    (root / name).mkdir(parents=True)
    for key, value in files.items():
        (root / name / key).write_text(value + "\n")


def test_linux_battery_probe(tmp_path: Path):
    def case(name: str, *supplies: tuple[str, dict]) -> bool:
        root = tmp_path / name
        root.mkdir()
        for sub, files in supplies:
            _supply(root, sub, **files)
        return power.linux_on_battery(root)

    assert not power.linux_on_battery(tmp_path / "missing")  # a desktop, a VM
    assert not case("desktop")
    ac_on, ac_off = ("AC", dict(type="Mains", online="1")), ("AC", dict(type="Mains", online="0"))
    discharging = ("BAT0", dict(type="Battery", status="Discharging"))
    assert not case("plugged", ac_on, discharging)
    assert case("unplugged", ac_off, ("BAT0", dict(type="Battery", status="Unknown")))
    assert case("no-ac-node", discharging)
    assert not case("charging", ("BAT0", dict(type="Battery", status="Charging")))
    assert not case("usb-c", ("ucsi", dict(type="USB", online="1")), ac_off, discharging)
    assert not case("mouse", ac_off, ("hid-mouse", dict(type="Battery", scope="Device", status="Discharging")))


def test_macos_pmset_output():
    assert power.macos_on_battery("Now drawing from 'Battery Power'\n -InternalBattery-0 (id=1)\t80%; discharging")
    assert not power.macos_on_battery("Now drawing from 'AC Power'\n -InternalBattery-0 (id=1)\t100%; charged")


def _files() -> set[str]:
    return {Path(p).name for p in indexed_paths()}


def test_watcher_pauses_on_battery_then_resumes(tmp_path: Path, tiny_model_dir: Path, sparc_home: Path):
    from sparc_local.model.encoder import Encoder

    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("The battery lasts ten hours.\n")
    info = ModelInfo.load(tiny_model_dir)
    battery = threading.Event()
    battery.set()  # on battery from the start: even the catch-up waits
    probes = []
    w = Watcher([str(root)], info, lambda: Encoder(info, threads=1),
                WatchConfig(quiet_period=0.1, max_delay=1.0, on_battery=lambda: probes.append(1) or battery.is_set(),
                            power_poll=0.1))
    w.start(timeout=15)
    try:
        wait_until(lambda: w.status().phase == "paused", "paused")
        (root / "b.txt").write_text("The charger is in the drawer.\n")
        time.sleep(1.0)
        assert w.status().paused == "on battery power" and w.status().queue == 1
        assert not Path(sparc_home / "index.db").exists() or _files() == set()

        # `status` says so (the state file a watcher process writes from this status)
        (sparc_home / "watch.pid").write_text(f"{os.getpid()}\n")
        state = daemon._StateWriter()
        state(w.status())
        since = time.strftime("%Y-%m-%d %H:%M", time.localtime(w.status().started_at))
        out = runner.invoke(app, ["status"]).output
        assert f"Watcher:      running (pid {os.getpid()}) since {since}, queue 1, paused on battery power\n" in out

        n = len(probes)
        battery.clear()  # back on mains: the catch-up and the queued change go through
        wait_until(lambda: _files() == {"a.txt", "b.txt"}, "resumed")
        assert len(probes) > n and w.status().paused is None and w.status().last_error is None
        wait_until(lambda: w.status().queue == 0, "queue drained")  # b.txt's later events
        state(w.status())
        assert ", queue 0\n" in runner.invoke(app, ["status"]).output
    finally:
        w.stop(timeout=15)
        (sparc_home / "watch.pid").unlink(missing_ok=True)


def _encoded() -> tuple[int, int]:
    with Index() as idx:
        return idx.encoded_counts()


def test_watcher_stops_encoding_when_unplugged_mid_run(tmp_path: Path, tiny_model_dir: Path):
    """The probe says battery while the catch-up encodes: it stops after the current encoder
    batch, keeps what it committed, and finishes once on mains again."""
    from sparc_local.model.encoder import Encoder

    root = tmp_path / "docs"
    root.mkdir()
    for i in range(40):
        (root / f"n{i:02d}.txt").write_text(" ".join(f"Note {i} part {j} is about the river." for j in range(30)))
    info = ModelInfo.load(tiny_model_dir)
    calls, mains = [0], threading.Event()

    def probe() -> bool:
        calls[0] += 1
        return calls[0] > 80 and not mains.is_set()  # unplugged after the first of three batches

    w = Watcher([str(root)], info, lambda: Encoder(info, threads=1),
                WatchConfig(quiet_period=0.1, on_battery=probe, power_poll=0.0))
    w.start(timeout=30)
    try:
        wait_until(lambda: w.status().phase == "paused", "paused mid-run")
        with Index() as idx:  # every file stored and answerable by BM25; the encoder stopped part way
            done, total = idx.encoded_counts()
        assert len(_files()) == 40 and 0 < done < total == 1200
        mains.set()
        wait_until(lambda: _encoded() == (1200, 1200), "finished on mains")
        with Index() as idx:
            assert idx.verify() == []
    finally:
        w.stop(timeout=15)


def test_daemon_args_carry_the_power_options(active_tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The flags a user gives `watch --daemon` reach the detached watcher's process unchanged."""
    runs: list[tuple] = []
    monkeypatch.setattr(daemon, "run", lambda roots, info, config, process, **_: runs.append((roots, config, process)))
    flags = ["--normal-priority", "--on-battery", "--no-ignore", "--quiet-period", "3.5", "--exclude", "*.log",
             "--threads", "2", "--wait", "1.5", "--poll"]
    assert runner.invoke(app, ["watch", *flags, str(tmp_path)]).exit_code == 0
    (roots, config, process), = runs
    assert config == WatchConfig(quiet_period=3.5, exclude=["*.log"], ignore_files=False, polling=True)
    assert process == WatchProcess(threads=2, wait=1.5, low_priority=False, pause_on_battery=False)
    args = daemon.watch_args(roots, config, process)
    assert args[0] == SETTINGS and args[2:] == ["--", *roots]
    assert from_json(args[1]) == (config, process)
    assert runner.invoke(app, ["watch", *args]).exit_code == 0  # the detached process's command line
    assert runs[1] == runs[0]
