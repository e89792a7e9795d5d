"""What sparc-local leaves on the machine: files only in its data dir, and no network connection.

Every command runs as its own process, as a user would run it, in a fresh HOME and temp dir,
without CI variables: onnxruntime's telemetry stays silent when it sees one (model/runtime.py), so
under CI a check with them would prove nothing. The data dir is the platform's default (no
SPARC_LOCAL_HOME), the one the README names. The user's XDG_CACHE_HOME points outside HOME, as
some set it (onnxruntime's telemetry writes there, not in ~/.cache), and is watched too; the
tester's own XDG variables are never inherited.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparc_local.model.info import RERANKER_VAR
from sparc_local.model.runtime import CI_VARIABLES, TELEMETRY_SWITCH
from sparc_local.paths import ENV_HOME
from tests.tiny import make_tiny_adapt_model

REPO = Path(__file__).resolve().parents[1]
STRACE = shutil.which("strace")
# the calls that could reach another machine; AF_UNIX sockets stay on this one
NET_CALLS = "socket,connect,sendto,sendmsg,bind"
TRACED = f"execve,{NET_CALLS}"  # execve: proof that strace followed every process
# strace 5.3+: the traced processes stop only at the calls traced, not at every system call (the
# scenario took 10 s instead of 12 s on 2 cores); where the kernel refuses the filter, strace stops at every call
_SECCOMP = ["--seccomp-bpf"] if STRACE and "--seccomp-bpf" in subprocess.run(
    [STRACE, "-h"], capture_output=True, text=True).stdout else []


@dataclass(frozen=True)
class Footprint:
    home: Path
    data_dir: Path
    docs: Path
    before: dict[str, set[str]]
    after: dict[str, set[str]]
    codes: dict[str, int]
    trace: Path | None


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def _reqa(folder: Path) -> Path:
    folder.mkdir()
    sentences = ["Green tea should steep for two minutes.", "Black tea takes four minutes.",
                 "The kettle is descaled every month."]
    with gzip.open(folder / "corpus.jsonl.gz", "wt") as fh:
        for i, text in enumerate(sentences):
            fh.write(json.dumps({"id": f"p-{i}", "text": text, "passage": "p", "position": i}) + "\n")
    with gzip.open(folder / "queries.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"id": "q1", "question": "how long does green tea steep", "answers": ["p-0"]}) + "\n")
    return folder


# Each command is its own process, as a user runs it; exit codes go to stdout as JSON.
_DRIVER = r"""
import json, subprocess, sys, time
from pathlib import Path

data_dir, model, docs, reqa = (Path(a) for a in sys.argv[1:5])
codes = {}

def run(*args):
    out = subprocess.run([sys.executable, "-m", "sparc_local", *args], capture_output=True, text=True)
    codes[" ".join(a for a in args[:2] if not a.startswith("/"))] = out.returncode
    if out.returncode:
        sys.exit(f"{args}: {out.stdout[-2000:]}{out.stderr[-2000:]}")
    return out

# the tiny model for the demo too (its own data dir, paths.DEMO_DIR): the shipped one costs a minute
for folder in (data_dir, data_dir / "demo"):
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    (folder / "active-model").write_text(str(model))
run("demo")
run("index", str(docs), "-q")
run("ask", "river bridge", "--json")
run("watch", "--daemon", "--quiet-period", "0.1", "--max-delay", "1")
(docs / "ferry.txt").write_text("The ferry leaves at noon.\n")
deadline = time.monotonic() + 120
while json.loads(run("status", "--json").stdout)["files"] < 123 and time.monotonic() < deadline:
    time.sleep(0.5)
run("watch", "--stop")
run("adapt", "--steps", "3", "-q")
run("eval", str(reqa), "--json")
run("forget", str(docs / "private"))
print(json.dumps(codes))
"""


@pytest.fixture(scope="module")
def footprint(tmp_path_factory: pytest.TempPathFactory) -> Footprint:
    root = tmp_path_factory.mktemp("footprint")
    home, tmp, docs, cache = root / "home", root / "tmp", root / "docs", root / "cache"
    for d in (home, tmp, docs / "private", cache):
        d.mkdir(parents=True)
    model = make_tiny_adapt_model(root / "model")  # outside every folder the test watches
    (docs / "notes.txt").write_text("The river bridge was built in one year.\n")
    (docs / "private" / "secret.txt").write_text("The passphrase is kept in the green book.\n")
    for i in range(120):  # adapt needs a corpus of 100+ sentences
        (docs / f"filler{i}.txt").write_text(f"The bridge number {i} was painted in a year of music.\n")
    reqa = _reqa(root / "reqa")
    env = {k: v for k, v in os.environ.items()  # RERANKER_VAR left out: `ask` runs the shipped reranker
           if k not in CI_VARIABLES and k not in (ENV_HOME, TELEMETRY_SWITCH, RERANKER_VAR) and not k.startswith("XDG_")}
    env.update(HOME=str(home), TMPDIR=str(tmp), XDG_CACHE_HOME=str(cache), PYTHONPATH=str(REPO),
               PYTHONDONTWRITEBYTECODE="1")
    data_dir = home / ".local" / "share" / "sparc-local"
    watched = {"home": home, "tmp": tmp, "docs": docs, "cache": cache}
    before = {name: _files(path) for name, path in watched.items()}
    trace = root / "strace"
    # one driver for the whole scenario, so one strace -f follows every process, the watcher too
    cmd = [sys.executable, "-c", _DRIVER, str(data_dir), str(model.path), str(docs), str(reqa)]
    if STRACE:
        cmd = [STRACE, "-f", *_SECCOMP, "-qq", "-e", f"trace={TRACED}", "-o", str(trace), *cmd]
    out = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    codes = json.loads(out.stdout.strip().splitlines()[-1])
    after = {name: _files(path) for name, path in watched.items()}
    return Footprint(home, data_dir, docs, before, after, codes, trace if STRACE else None)


def test_nothing_is_written_outside_the_data_dir(footprint: Footprint):
    """Not in HOME (no telemetry queue, no cache), not in the temp dir, not beside the user's files."""
    fp = footprint
    assert fp.codes == {"demo": 0, "index": 0, "ask river bridge": 0, "watch --daemon": 0, "status --json": 0,
                        "watch --stop": 0, "adapt --steps": 0, "eval": 0, "forget": 0}
    inside = str(fp.data_dir.relative_to(fp.home)) + os.sep
    new_in_home = fp.after["home"] - fp.before["home"]
    assert {f for f in new_in_home if not f.startswith(inside)} == set()
    assert "index.db" in {f.removeprefix(inside) for f in new_in_home}
    assert fp.after["tmp"] == fp.before["tmp"] == set()
    assert fp.after["cache"] == fp.before["cache"] == set()  # $XDG_CACHE_HOME, outside HOME
    assert fp.after["docs"] - fp.before["docs"] == {"ferry.txt"}  # the edit the test made, nothing else


# where onnxruntime keeps its device id: under $XDG_CACHE_HOME when set, else under ~/.cache
DEVICE_ID = "Microsoft/DeveloperTools/.onnxruntime/deviceid"


@pytest.mark.parametrize("xdg_cache", [False, True], ids=["home-cache", "xdg-cache-outside-home"])
def test_telemetry_would_have_written_without_the_switch(tmp_path: Path, xdg_cache: bool):
    """The control: the same environment without sparc-local's switch does get onnxruntime's device id,
    on the releases that have the telemetry (so the test above proves the switch, not luck), in
    ~/.cache or in an XDG_CACHE_HOME outside HOME; through ``model.runtime`` nowhere. Whatever XDG
    variables the tester has are not inherited."""
    from sparc_local.model.runtime import onnxruntime

    version = tuple(int(x) for x in re.findall(r"\d+", onnxruntime().__version__)[:2])
    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    cache.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in CI_VARIABLES and k != TELEMETRY_SWITCH and not k.startswith("XDG_")}
    env.update(HOME=str(home), **({"XDG_CACHE_HOME": str(cache)} if xdg_cache else {}))
    subprocess.run([sys.executable, "-c", "import onnxruntime"], env=env, check=True, timeout=120)
    written = {"home": _files(home), "cache": _files(cache)}
    if version < (1, 29):  # benchmarks/ort_telemetry.py: the first release with it
        assert written == {"home": set(), "cache": set()}
    elif xdg_cache:
        assert DEVICE_ID in written["cache"] and written["home"] == set()
    else:
        assert f".cache/{DEVICE_ID}" in written["home"] and written["cache"] == set()
    for folder in (home, cache):
        shutil.rmtree(folder)
        folder.mkdir()
    code = "from sparc_local.model.runtime import onnxruntime; onnxruntime()"
    subprocess.run([sys.executable, "-c", code], env=dict(env, PYTHONPATH=str(REPO)), check=True, timeout=120)
    assert (_files(home), _files(cache)) == (set(), set())


@pytest.mark.skipif(STRACE is None, reason="strace is not installed (apt-get install strace)")
def test_no_connection_leaves_the_machine(footprint: Footprint):
    """strace of every process (forks and the watcher daemon too): no socket but AF_UNIX is opened,
    and nothing is connected to or sent to any address of another family."""
    assert footprint.trace is not None
    calls = footprint.trace.read_text().splitlines()
    # the control: every command ran under strace, the watcher the CLI detached too
    execs = [line for line in calls if "execve(" in line and '"sparc_local"' in line]
    assert len(execs) >= len(footprint.codes) + 1
    assert any('"watch", "--settings"' in line for line in execs), execs  # the daemon's own command line
    families = {m for line in calls for m in re.findall(r"AF_[A-Z0-9]+", line)}
    assert families <= {"AF_UNIX"}, calls
