"""Indexing as a background job: low CPU and I/O priority, and no encoding on battery.

``low_priority()`` renices the process to ``NICE`` and puts its I/O in the idle class (Linux,
``ioprio_set``) or the throttled tier (macOS, ``setiopolicy_np``), as Baloo and Tracker do for
their indexers: a program the user works in gets the CPU and the disk first, and indexing takes
what is left. Linux keeps both per thread and a new thread inherits them, so it must run before
onnxruntime starts its thread pool (the commands call it first thing).

The I/O class is set with the raw syscall through ctypes rather than psutil: it is one call,
psutil would add a compiled dependency for it, and psutil's ``ionice`` has no macOS side either.

``on_battery()`` is what the watcher asks before it encodes (Linux: /sys/class/power_supply;
macOS: ``pmset -g batt``); it never raises, and says False when it cannot tell.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

NICE = 19  # the lowest CPU priority: a nice-0 program gets ~98% of a core both want (CFS weights 1024:15)
POWER_SUPPLY = Path("/sys/class/power_supply")
_MAINS = frozenset({"Mains", "USB", "USB_C", "USB_PD", "USB_PD_DRP", "Wireless"})  # types that feed a laptop

# Linux ioprio_set(2): (class << 13) | level; the idle class gets the disk only when no one else wants it
IOPRIO_WHO_PROCESS = 1
IOPRIO_CLASS_SHIFT = 13
IOPRIO_CLASS_BE, IOPRIO_CLASS_IDLE = 2, 3
_IOPRIO_SET = {"x86_64": 251, "amd64": 251, "i386": 289, "i686": 289, "aarch64": 30, "arm64": 30,
               "riscv64": 30, "armv7l": 314, "armv6l": 314, "ppc64le": 273, "ppc64": 273, "s390x": 282}
_IOPRIO_GET = {"x86_64": 252, "amd64": 252, "i386": 290, "i686": 290, "aarch64": 31, "arm64": 31,
               "riscv64": 31, "armv7l": 315, "armv6l": 315, "ppc64le": 274, "ppc64": 274, "s390x": 283}
# macOS setiopolicy_np(3)
IOPOL_TYPE_DISK, IOPOL_SCOPE_PROCESS, IOPOL_THROTTLE = 0, 0, 3


@dataclass(frozen=True)
class Priority:
    """What ``low_priority`` set, to restore it and to say it (e.g. in a benchmark)."""

    nice: int  # the nice value before
    io: int | None  # the Linux I/O priority before (None: not changed)
    io_set: str  # "idle", "throttle" (macOS) or why it was left alone


@functools.cache
def libc():
    """The C library of this process (Linux, macOS), loaded once."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _ioprio(call: dict[str, int], *args: int) -> int:
    """The ioprio_set/ioprio_get syscall on this machine (-1 where its number is unknown)."""
    number = call.get(platform.machine().lower())
    if number is None:
        return -1
    return libc().syscall(number, IOPRIO_WHO_PROCESS, 0, *args)


def io_priority() -> int | None:
    """This thread's Linux I/O priority, ``(class << 13) | level`` (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    value = _ioprio(_IOPRIO_GET)
    return None if value < 0 else value


def lower() -> Priority:
    """Nice ``NICE`` and idle (Linux) / throttled (macOS) I/O for this process and its later threads."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, max(before, NICE))
    io_before, io_set = None, "unchanged (not Linux or macOS)"
    if sys.platform.startswith("linux"):
        io_before = io_priority()
        ok = io_before is not None and _ioprio(_IOPRIO_SET, IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT) == 0
        io_set = "idle" if ok else f"unchanged (no ioprio_set on {platform.machine()})"
    elif sys.platform == "darwin":
        try:
            ok = libc().setiopolicy_np(IOPOL_TYPE_DISK, IOPOL_SCOPE_PROCESS, IOPOL_THROTTLE) == 0
        except AttributeError:
            ok = False
        io_set = "throttle" if ok else "unchanged (setiopolicy_np failed)"
    return Priority(before, io_before, io_set)


def restore(prio: Priority) -> None:
    """Undo ``lower`` where allowed (raising the CPU priority again needs privileges; without them
    the process keeps the low one: it is about to exit, or a test run goes on a little slower)."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, prio.nice)
    if prio.io is not None:
        _ioprio(_IOPRIO_SET, prio.io)


@contextlib.contextmanager
def low_priority(enabled: bool = True) -> Iterator[Priority | None]:
    """``lower`` for the duration of a command (nothing when not enabled)."""
    if not enabled:
        yield None
        return
    prio = lower()
    try:
        yield prio
    finally:
        restore(prio)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def linux_on_battery(root: Path = POWER_SUPPLY) -> bool:
    """A system battery discharging with no mains supply online. Peripheral batteries (a mouse,
    scope "Device") do not count; a machine without a battery is never on battery."""
    try:
        supplies = sorted(root.iterdir())
    except OSError:
        return False
    mains, batteries = [], []
    for s in supplies:
        kind = _read(s / "type")
        if kind in _MAINS:
            mains.append(_read(s / "online") == "1")
        elif kind == "Battery" and _read(s / "scope") != "Device":
            batteries.append(_read(s / "status"))
    if not batteries or any(mains):
        return False
    return bool(mains) or any(status == "Discharging" for status in batteries)


def macos_on_battery(pmset_output: str | None = None) -> bool:
    """``pmset -g batt`` says "Now drawing from 'Battery Power'" on battery."""
    if pmset_output is None:
        try:
            pmset_output = subprocess.run(["pmset", "-g", "batt"], capture_output=True, text=True,
                                          timeout=5).stdout
        except (OSError, subprocess.SubprocessError):
            return False
    return "'Battery Power'" in pmset_output


def on_battery() -> bool:
    """Whether this machine runs on battery now (False when it cannot tell)."""
    if sys.platform.startswith("linux"):
        return linux_on_battery()
    if sys.platform == "darwin":
        return macos_on_battery()
    return False
