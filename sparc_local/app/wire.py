"""The one serializer of the typed requests and reports that cross a process boundary (the
watcher's handoff): a frozen dataclass as JSON-ready data with its type and a format version, and
back, strictly.  A version, a type or a field this sparc-local does not know is ``WireMismatch``:
a command and a watcher of different versions fail loudly instead of dropping what they miss.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from sparc_local.errors import SparcError

VERSION = 1  # raise it when a field's meaning changes; a new or removed field is caught anyway
T = TypeVar("T")
SAME_VERSION = ("Run one version of sparc-local for the command and the watcher: stop the watcher "
                "(`sparc-local watch --stop`) and start it again with this version.")


class WireMismatch(SparcError):
    """A request or report written by another version of sparc-local (version, type or fields)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, SAME_VERSION)


def encode(value: object) -> dict[str, Any]:
    """``value`` (a dataclass instance) as {"version", "kind", "fields"}, JSON-ready."""
    return {"version": VERSION, "kind": type(value).__name__, "fields": _plain(value)}


def decode(data: object, *kinds: type[T]) -> T:
    """The inverse of ``encode``, for one of ``kinds``; WireMismatch for anything else."""
    if not isinstance(data, dict) or data.get("version") != VERSION:
        version = data.get("version") if isinstance(data, dict) else None
        raise WireMismatch(f"a request of format version {version!r}, this sparc-local reads version {VERSION}")
    known = {k.__name__: k for k in kinds}
    kind = known.get(str(data.get("kind")))
    if kind is None:
        raise WireMismatch(f"a request of unknown kind {data.get('kind')!r} (expected {', '.join(known)})")
    return _build(kind, data.get("fields"))


def _plain(value: object) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _build(kind: type[T], data: object) -> T:
    if not isinstance(data, dict):
        raise WireMismatch(f"a {kind.__name__} without its fields")
    names = {f.name for f in dataclasses.fields(kind) if f.init}  # type: ignore[arg-type]  # T: the dataclasses decode names
    unknown = sorted(set(data) - names)
    if unknown:
        raise WireMismatch(f"a {kind.__name__} with fields this sparc-local does not know: {', '.join(unknown)}")
    hints = typing.get_type_hints(kind)
    try:
        return kind(**{name: _value(hints[name], v) for name, v in data.items()})
    except TypeError as err:  # a field it lacks
        raise WireMismatch(f"a {kind.__name__} this sparc-local cannot read ({err})") from None


def _value(hint: Any, value: object) -> Any:
    """``value`` as the type ``hint`` says: nested dataclasses built, sequences as declared."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, value)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if value is None or len(inner) != 1:
            return value
        return _value(inner[0], value)
    if not isinstance(value, list):
        return value
    if origin is tuple and args and args[-1] is not Ellipsis:
        return tuple(_value(a, v) for a, v in zip(args, value))
    if origin in (tuple, Iterable, Sequence):
        return tuple(_value(args[0], v) for v in value) if args else tuple(value)
    if origin is list:
        return [_value(args[0], v) for v in value] if args else value
    return value
