"""The one base of every error a user can fix.

The library raises these and never prints; ``cli/common.py`` (``report``) turns each into
``Error: <message>``, its remedy on the next line, and exit code 1, in one place. Anything else
that escapes is a bug and keeps its traceback. Modules that own a condition define their
subclass beside it (``DiskFull``, ``LockHeld``, ``AdaptError`` ...); the ones shared by several
modules live here.
"""

from __future__ import annotations


class SparcError(Exception):
    """A condition the user can fix: str() says what happened, ``remedy`` what to do (may be empty)."""

    def __init__(self, message: str, remedy: str = "") -> None:
        super().__init__(message)
        self.remedy = remedy


class UserError(SparcError):
    """A problem with what a command was given (a path, a missing index)."""


class DataDirUnusable(SparcError):
    """The data folder (or a file in it) cannot be created, read or written."""


class IndexCorrupt(SparcError):
    """index.db is not a SQLite database, or SQLite found it damaged."""


class SchemaTooNew(SparcError):
    """index.db was written by a newer sparc-local: this one must not guess at its layout."""


class ModelError(SparcError):
    """A model folder that cannot be used; `status` shows the active model as missing instead."""


class ModelMissing(ModelError):
    """A model folder, or a file the model needs, is not there."""


class ModelDamaged(ModelError):
    """A model file is there but cannot be read."""


class NoQueryTokens(SparcError):
    """The question holds only tokens that never count (punctuation, special, unknown): nothing to score."""


class DatasetMissing(SparcError):
    """`eval` was given a folder that is not a ReQA dataset."""
