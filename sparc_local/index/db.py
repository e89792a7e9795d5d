"""The storage core: one SQLite connection with its pragmas, migrations, meta and transactions.

It knows tables, not what they mean: files, sentences and segments are ``store.py`` and
``segments.py``; scoring is ``query/``.  Every mutation is one ``BEGIN IMMEDIATE ... COMMIT``
transaction, so a crash leaves each batch either fully applied or not at all.  Write
transactions nest (SAVEPOINTs), so a user action made of several mutations (`forget`) commits
once.  WAL + busy_timeout let readers run while a writer works.

Keep module-level imports light: this is on the ``ask`` path.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Self

from sparc_local.errors import DataDirUnusable, IndexCorrupt, SchemaTooNew, SparcError

from . import postings as codec
from .schema import MIGRATIONS, SCHEMA_VERSION

BUSY_TIMEOUT_MS = 5000
# primary result codes (an extended code's low byte): errors are classified by code, never by message text
_CORRUPT_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)  # "malformed", "not a database"
_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)  # "database is locked", "database table is locked"
_FULL_CODES = (sqlite3.SQLITE_FULL,)  # "database or disk is full"
MMAP_BYTES = 2 << 30  # address space only; pages come from the OS page cache (SQLite caps it near 2 GB)
WAL_LIMIT_BYTES = 8 << 20  # a checkpointed WAL is truncated back to this size, not kept at its high-water mark
WEIGHT_SCALE = "weight_scale"  # meta key: the quantization step, see postings.py
LAST_UPDATE = "last_update"  # meta key: time of the last write
MODEL_PATH = "model_path"  # meta key: the folder of the model that last wrote
MAX_PARAMS = 900  # bound parameters per IN (...) list, below SQLite's old default limit of 999


def _primary_code(err: BaseException) -> int | None:
    """SQLite's primary result code of ``err``; None when SQLite did not raise it."""
    code = getattr(err, "sqlite_errorcode", None)  # set only on errors that come from SQLite itself
    return code & 0xFF if isinstance(err, sqlite3.Error) and code is not None else None


def is_corrupt(err: BaseException) -> bool:
    """The database file is damaged or is not a database."""
    return _primary_code(err) in _CORRUPT_CODES


def is_busy(err: BaseException) -> bool:
    """Another connection holds a lock the operation needed (past the busy timeout): try again later."""
    return _primary_code(err) in _BUSY_CODES


def is_full(err: BaseException) -> bool:
    """The disk (or the database's size limit) is full."""
    return _primary_code(err) in _FULL_CODES


def chunks(seq: Sequence, n: int = MAX_PARAMS) -> Iterator[Sequence]:
    """``seq`` in slices of at most ``n``: one IN (...) list each."""
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


def qmarks(n: int) -> str:
    return ",".join("?" * n)


def remove_database(path: Path) -> None:
    """Delete a database file and its -wal, -shm and -journal files, those that exist."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")


def _use_wal(c: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """Put the database in WAL mode, waiting out another connection that opens it at the same time.

    Changing the journal mode needs an exclusive lock, and SQLite refuses it at once, without the
    busy handler, while another connection writes (its deadlock rule): two first opens of a new
    index (the watcher and an `ask`) would race. So retry here, for as long as the busy timeout."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            if c.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                c.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as err:
            if not is_busy(err) or time.monotonic() > deadline:
                raise
        time.sleep(0.01)


def _secure_file(path: Path) -> None:
    """Create ``path`` 0600 if missing; tighten it to 0600 if it is wider."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o077:
            with contextlib.suppress(PermissionError):  # not ours to fix
                os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


class Database:
    """One connection to an index database. Not thread-safe: use one per thread."""

    def __init__(self, path: str | os.PathLike | None = None, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS):
        if path is None:
            from sparc_local.paths import db_path

            path = db_path()
        self.path = Path(path)
        # None only before _connect and after close(): typed as connected, which it is wherever it is used
        self._conn: sqlite3.Connection = None  # type: ignore[assignment]  # see the line above
        self._depth = 0  # open write_transaction levels: 0 = none, 1 = BEGIN IMMEDIATE, more = SAVEPOINTs
        self._scale: float | None = None
        try:
            self._connect(busy_timeout_ms)
        except BaseException as err:
            self.close()
            user = self._user_error(err)
            if user is None:
                raise
            raise user from err

    def _connect(self, busy_timeout_ms: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _secure_file(self.path)
        self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=busy_timeout_ms / 1000)
        c = self._conn
        c.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        # only for a brand-new database (it would take effect on no other, yet still write the
        # header): lets merge_all() give freed pages back with PRAGMA incremental_vacuum
        if c.execute("PRAGMA user_version").fetchone()[0] == 0:
            c.execute("PRAGMA auto_vacuum = INCREMENTAL")
        _use_wal(c, busy_timeout_ms)
        c.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: atomic and consistent; fsync at checkpoints
        c.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
        c.execute("PRAGMA foreign_keys = ON")
        # read big posting blobs straight from the page cache (measured: 8x faster fetch)
        c.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        for suffix in ("-wal", "-shm"):
            side = Path(str(self.path) + suffix)
            with contextlib.suppress(OSError):
                if side.stat().st_mode & 0o077:
                    os.chmod(side, 0o600)
        self._migrate()

    def _user_error(self, err: BaseException) -> SparcError | None:
        """The user-facing form of an error opening or reading the database, None if it is not one."""
        if is_corrupt(err):
            return IndexCorrupt(f"the index {self.path} is damaged ({err})",
                                "Move it away, then run `sparc-local index FOLDER` to build it again "
                                "(your files are not touched).")
        if isinstance(err, (PermissionError, IsADirectoryError)) or _primary_code(err) == sqlite3.SQLITE_CANTOPEN:
            reason = err.strerror if isinstance(err, OSError) else str(err)
            return DataDirUnusable(f"cannot open the index {self.path} ({reason})",
                                   "Make it a file you can read and write (chmod 600), or move it away.")
        return None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None  # type: ignore[assignment]  # closed: see __init__

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()
        # damage is often found only when a query reaches the broken page
        if isinstance(exc, sqlite3.DatabaseError) and (user := self._user_error(exc)) is not None:
            raise user from exc

    @property
    def conn(self) -> sqlite3.Connection:
        return self._conn

    def checkpoint(self) -> None:
        """Fold the WAL into the database file and empty it (it would otherwise keep a copy of every
        page written); waits for readers up to the busy timeout."""
        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def replace_with(self, new_path: Path) -> None:
        """Make this database's content that of the database at new_path, atomically for every
        reader, then delete new_path.

        SQLite's online backup, not a rename: in WAL mode the -wal and -shm files are found by
        name, so a connection to a renamed-over file could checkpoint into and delete the ones
        the new file uses. One backup step is one write transaction here (the WAL receives the
        new pages), so readers see the old content or the new, never a mix.
        """
        new = sqlite3.connect(new_path, isolation_level=None)
        try:
            new.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            if self._conn.in_transaction:
                raise RuntimeError("the database has an open transaction")
            new.backup(self._conn, pages=-1)
        finally:
            new.close()
        self.checkpoint()
        remove_database(new_path)

    def schema_version(self) -> int:
        return self._conn.execute("PRAGMA user_version").fetchone()[0]

    def _migrate(self) -> None:
        c = self._conn
        for version, step in MIGRATIONS:
            if self.schema_version() >= version:
                continue
            try:
                if isinstance(step, str):
                    # executescript runs the whole script; the BEGIN inside makes it one
                    # transaction together with the user_version bump.
                    c.executescript(f"BEGIN IMMEDIATE;\n{step}\nPRAGMA user_version = {version};\nCOMMIT;")
                else:
                    c.execute("BEGIN IMMEDIATE")
                    if self.schema_version() < version:  # not another process first
                        step(c)
                        c.execute(f"PRAGMA user_version = {version}")
                    c.execute("COMMIT")
            except BaseException as err:
                if c.in_transaction:
                    c.execute("ROLLBACK")
                if isinstance(err, sqlite3.Error) and self.schema_version() >= version:  # another process migrated first
                    continue
                raise
        if self.schema_version() > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"the index {self.path} was written by a newer sparc-local (schema version "
                f"{self.schema_version()}; this one reads up to {SCHEMA_VERSION})",
                "Upgrade sparc-local, or move the index away and run `sparc-local index FOLDER` to build it again.")

    @contextlib.contextmanager
    def write_transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write: BEGIN IMMEDIATE ... COMMIT, ROLLBACK on any exception.

        Nested inside another write_transaction it is a SAVEPOINT instead: released into the
        outer transaction, or rolled back to (alone) on an exception, as sqlite-utils'
        ``Database.atomic()`` does.  So a user action built from several store calls commits
        once.  IMMEDIATE takes the write lock up front: a deferred transaction that reads and
        then writes fails at once (SQLITE_BUSY_SNAPSHOT) when another writer committed meanwhile.
        """
        c = self._conn
        depth = self._depth
        name = f"write_{depth}"
        c.execute("BEGIN IMMEDIATE" if depth == 0 else f"SAVEPOINT {name}")
        self._depth = depth + 1
        try:
            yield c
        except BaseException:
            if c.in_transaction:  # some errors (e.g. SQLITE_FULL) already rolled everything back
                if depth == 0:
                    c.execute("ROLLBACK")
                else:
                    c.execute(f"ROLLBACK TO {name}")
                    c.execute(f"RELEASE {name}")
            raise
        finally:
            self._depth = depth
        try:
            c.execute("COMMIT" if depth == 0 else f"RELEASE {name}")
        except BaseException:
            if depth == 0 and c.in_transaction:
                c.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def read_transaction(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several reads (e.g. postings + tombstones)."""
        c = self._conn
        if c.in_transaction:
            yield c
            return
        c.execute("BEGIN")
        try:
            yield c
        finally:
            c.execute("COMMIT")

    def snapshot_key(self, data_version: int | None = None) -> tuple[int, int]:
        """A key that changes whenever the database does: ``PRAGMA data_version`` moves when
        another connection commits and ``total_changes`` when this one writes.  Exact for the
        open read transaction's snapshot when read inside it (or pass the data_version read
        with the rows)."""
        if data_version is None:
            data_version = self._conn.execute("PRAGMA data_version").fetchone()[0]
        return data_version, self._conn.total_changes

    # ------------------------------------------------------------------ meta

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else row[0]

    def set_meta(self, key: str, value: str | None) -> None:
        if key == WEIGHT_SCALE:
            raise ValueError("use set_weight_scale()")
        self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def meta(self) -> dict[str, str | None]:
        return dict(self._conn.execute("SELECT key, value FROM meta").fetchall())

    @property
    def weight_scale(self) -> float:
        """Quantization step: stored weight q means f = q * weight_scale."""
        if self._scale is None:
            v = self.get_meta(WEIGHT_SCALE)
            if v is None:
                return codec.scale_for_ceiling()  # what the first write will store
            self._scale = float(v)
        return self._scale

    def set_weight_scale(self, scale: float) -> None:
        """Fix the quantization step (e.g. ``postings.scale_for_ceiling(16.0)``).

        Only allowed while the index has no postings, or to the value it already has.
        """
        scale = float(scale)
        if not scale > 0:
            raise ValueError("weight scale must be > 0")
        with self.write_transaction() as c:
            cur = c.execute("SELECT value FROM meta WHERE key = ?", (WEIGHT_SCALE,)).fetchone()
            if cur is not None and float(cur[0]) == scale:
                return
            if c.execute("SELECT 1 FROM postings LIMIT 1").fetchone() is not None:
                raise ValueError("cannot change the weight scale of a non-empty index; rebuild it")
            c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (WEIGHT_SCALE, repr(scale)))
        self._scale = scale

    def scale_in_txn(self, c: sqlite3.Connection) -> float:
        """The quantization step inside a write transaction, stored now if the index has none."""
        row = c.execute("SELECT value FROM meta WHERE key = ?", (WEIGHT_SCALE,)).fetchone()
        if row is None:
            scale = codec.scale_for_ceiling()
            c.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (WEIGHT_SCALE, repr(scale)))
        else:
            scale = float(row[0])
        self._scale = scale
        return scale
