"""`sparc-local service install|uninstall`: run the watcher at login, supervised by the OS.

Linux: a systemd *user* unit, ~/.config/systemd/user/sparc-local-watch.service.
macOS: a launchd agent, ~/Library/LaunchAgents/io.github.sparc-local.watch.plist.
Both run ``<this interpreter> -m sparc_local watch`` in the foreground (the supervisor does the
detaching and stops it with SIGTERM, which the watcher handles cleanly), at low CPU and I/O
priority. Nothing is enabled behind the user's back: install writes the file and returns the
command that enables it. $SPARC_LOCAL_SERVICE_DIR overrides the target folder (tests use it so
they never touch the real ~/.config).
"""

from __future__ import annotations

import contextlib
import os
import plistlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sparc_local.errors import SparcError

ENV_DIR = "SPARC_LOCAL_SERVICE_DIR"
UNIT = "sparc-local-watch"
LABEL = "io.github.sparc-local.watch"


class ServiceError(SparcError):
    """The unit / agent file cannot be written or removed here."""


class ServiceEnabled(ServiceError):
    """Removing the unit file of an enabled unit would leave systemd pointing at nothing."""


@dataclass(frozen=True)
class ServiceFile:
    path: Path
    enable: str  # the command to run next: enables it (install) or unloads it (uninstall)
    kind: str  # "systemd" | "launchd"


def _kind(platform: str) -> str:
    if platform.startswith("linux"):
        return "systemd"
    if platform == "darwin":
        return "launchd"
    raise ServiceError(f"no service support on {platform}", "Run `sparc-local watch --daemon` at login instead.")


def service_path(platform: str = sys.platform, directory: str | os.PathLike | None = None) -> Path:
    kind = _kind(platform)
    folder = directory or os.environ.get(ENV_DIR)
    if folder:
        base = Path(folder).expanduser()
    elif kind == "systemd":
        config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        base = Path(config) / "systemd" / "user"
    else:
        base = Path.home() / "Library" / "LaunchAgents"
    return base / (f"{UNIT}.service" if kind == "systemd" else f"{LABEL}.plist")


def _command(python: str) -> list[str]:
    return [python, "-m", "sparc_local", "watch"]


def _environment() -> dict[str, str]:
    """Carry the data dir and Milvus store choices over: a service does not see the installing
    shell's variables (a Milvus token is not written into the unit: docs/milvus.md)."""
    from sparc_local.milvus.store import StoreSpec
    from sparc_local.paths import STORE_ENV

    home = os.environ.get("SPARC_LOCAL_HOME")
    env = {"SPARC_LOCAL_HOME": str(Path(home).expanduser().absolute())} if home else {}
    if os.environ.get(STORE_ENV, "").strip():
        env[STORE_ENV] = StoreSpec.parse(os.environ[STORE_ENV]).text
    return env


def _quote(arg: str) -> str:
    if not arg or any(c in arg for c in ' \t"\'\\$%;'):
        return '"' + arg.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$").replace("%", "%%") + '"'
    return arg


def unit_text(python: str = sys.executable) -> str:
    env = "".join(f"Environment={_quote(f'{k}={v}')}\n" for k, v in _environment().items())
    return (
        "[Unit]\n"
        "Description=sparc-local watch: keep the index of your files up to date\n\n"
        "[Service]\n"
        "Type=simple\n"
        f"ExecStart={' '.join(_quote(a) for a in _command(python))}\n"
        f"{env}"
        "Restart=on-failure\n"
        "RestartSec=30\n"
        "Nice=10\n"
        "IOSchedulingClass=idle\n"
        "TimeoutStopSec=60\n\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def plist_bytes(python: str = sys.executable) -> bytes:
    from sparc_local.watch.files import out_path

    out = str(out_path())
    agent = dict(Label=LABEL, ProgramArguments=_command(python), RunAtLoad=True,
                 KeepAlive=dict(SuccessfulExit=False), ProcessType="Background", LowPriorityIO=True, Nice=10,
                 StandardOutPath=out, StandardErrorPath=out)
    if _environment():
        agent["EnvironmentVariables"] = _environment()
    return plistlib.dumps(agent)


@contextlib.contextmanager
def _file_errors(path: Path, action: str) -> Iterator[None]:
    """A folder the user cannot write to is theirs to fix: name the file instead of a traceback."""
    try:
        yield
    except OSError as err:
        raise ServiceError(f"cannot {action} {path} ({err.strerror or err})",
                           f"Check the permissions of {path.parent}, or set {ENV_DIR} to another folder.") from err


def install(platform: str = sys.platform, directory: str | os.PathLike | None = None,
            python: str = sys.executable) -> ServiceFile:
    """Write the unit / agent file (replacing an older one); return it with the enable command."""
    path = service_path(platform, directory)
    with _file_errors(path, "write"):
        path.parent.mkdir(parents=True, exist_ok=True)
        if _kind(platform) == "systemd":
            path.write_text(unit_text(python))
            return ServiceFile(path, f"systemctl --user daemon-reload && systemctl --user enable --now {UNIT}",
                               "systemd")
        path.write_bytes(plist_bytes(python))
    return ServiceFile(path, f"launchctl bootstrap gui/$(id -u) {path}", "launchd")


def uninstall(platform: str = sys.platform, directory: str | os.PathLike | None = None) -> ServiceFile | None:
    """Remove the unit / agent file; None if there was none. Returns the command that disables it."""
    path = service_path(platform, directory)
    if not path.exists():
        return None
    if _kind(platform) == "systemd":
        disable = f"systemctl --user disable --now {UNIT}"
        if (path.parent / "default.target.wants" / path.name).exists():
            raise ServiceEnabled(f"{UNIT} is enabled", f"Run `{disable}` first, then uninstall again.")
        with _file_errors(path, "remove"):
            path.unlink()
        return ServiceFile(path, "systemctl --user daemon-reload", "systemd")
    with _file_errors(path, "remove"):
        path.unlink()
    return ServiceFile(path, f"launchctl bootout gui/$(id -u)/{LABEL}", "launchd")
