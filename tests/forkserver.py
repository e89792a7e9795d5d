"""A process that imports once and forks a child for each run: tests/test_crash.py kills -9 dozens
of short runs of the same code, and a fresh interpreter for each spent longer importing numpy and
sparc_local (~0.4 s; ~0.6 s with onnxruntime) than most runs live. Each child is still a process
of its own, killed with SIGKILL while it writes the real index file; it opens its connections after
the fork (the server holds none) and sees the server's environment and working directory.

One run at a time: a child's stdout is the server's, framed by lines the server writes itself (its
pid before, its exit code once it has been reaped), and its stderr goes to a file of the test's.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

_MARK = "\x00forkserver"
_SERVER = r"""
import json, os, sys, traceback
exec(sys.argv[1])  # the imports the children share
print("\x00forkserver ready", flush=True)
for line in sys.stdin:
    script, argv, stderr = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            fd = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 2)
            os.close(fd)
            print("\x00forkserver pid", os.getpid(), flush=True)
            sys.argv = ["-c", *argv]
            exec(compile(script, "<forked>", "exec"), {"__name__": "__main__"})
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    print("\x00forkserver exit", os.waitstatus_to_exitcode(status), flush=True)
"""


class ForkServer:
    """``python -c`` runs of a script in children forked from one interpreter that ran ``imports``
    (import statements only: a thread or a connection opened before the fork would be shared)."""

    def __init__(self, imports: str, env: dict[str, str] | None = None, timeout: float = 300):
        self._proc = subprocess.Popen([sys.executable, "-c", _SERVER, imports], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, env=env)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._stdin, self._stdout = self._proc.stdin, self._proc.stdout
        self._fd = self._stdout.fileno()
        self._buffer = b""
        self.timeout = timeout
        self._running: Run | None = None
        assert self._line(time.monotonic() + timeout) == f"{_MARK} ready", "the fork server did not start"

    def _line(self, deadline: float) -> str:
        while b"\n" not in self._buffer:
            if not select.select([self._fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise TimeoutError("no line from the fork server in time")
            chunk = os.read(self._fd, 65536)
            if not chunk:
                raise EOFError(f"the fork server ended (exit code {self._proc.wait()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def run(self, script: str, *args: str, stderr: Path) -> Run:
        """Start ``python -c script *args`` as a forked child; its stderr goes to the file ``stderr``."""
        self._stdin.write((json.dumps([script, list(args), str(stderr)]) + "\n").encode())
        self._stdin.flush()
        mark, word, pid = self._line(time.monotonic() + self.timeout).split(" ")
        assert (mark, word) == (_MARK, "pid")
        self._running = Run(self, int(pid), stderr)
        return self._running

    def close(self) -> None:
        """Ends the server (and a child still running: a test that failed midway)."""
        if self._running is not None and self._running.returncode is None:
            self._running.kill()
        self._stdin.close()
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stdout.close()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Run:
    """One forked run, read and ended as a ``subprocess.Popen`` with text stdout would be."""

    def __init__(self, server: ForkServer, pid: int, stderr: Path):
        self._server, self.pid, self._stderr = server, pid, stderr
        self.returncode: int | None = None

    def readline(self, timeout: float | None = None) -> str:
        """The child's next line of stdout with its newline; "" once it has ended."""
        if self.returncode is not None:
            return ""
        try:
            line = self._server._line(time.monotonic() + (timeout or self._server.timeout))
        except TimeoutError as err:  # where the child and the server were (a child in the kernel's
            # uninterruptible sleep dies of SIGKILL only when its call returns)
            raise TimeoutError(f"{err}: child {_where(self.pid)}; server {_where(self._server._proc.pid)}") from None
        if line.startswith(f"{_MARK} exit "):
            self.returncode = int(line.rsplit(" ", 1)[1])
            return ""
        return line + "\n"

    def read(self, timeout: float | None = None) -> str:
        """The rest of the child's stdout, once it has ended."""
        lines = []
        while line := self.readline(timeout):
            lines.append(line)
        return "".join(lines)

    def kill(self) -> None:
        """SIGKILL, unless it has ended (as ``Popen.send_signal``: the server reaps it only when it has)."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        """The exit code (-9: killed), after reading whatever the child still wrote."""
        self.read(timeout)
        assert self.returncode is not None
        return self.returncode

    def stderr(self) -> str:
        return self._stderr.read_text() if self._stderr.exists() else ""


def _where(pid: int) -> str:
    """A process's pid, state letter and kernel wait channel (/proc), or that it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        wchan = Path(f"/proc/{pid}/wchan").read_text() or "-"
    except OSError:
        return f"{pid} gone"
    return f"{pid} state {stat.rsplit(')', 1)[1].split()[0]} in {wchan}"
