"""The Milvus side of the index: one collection of sentences, one of posting-key statistics.

Per sentence (an entity, primary key = the local index's sentence id): SPARC's top-K weights
and the BM25 impacts of the sentence and of its paragraph (``model/lexical.py``) as three
sparse inner-product fields, each holding the SAME uint8 values the local engine stores
(``index/postings.quantize``), keyed by token id; and path, file type, mtime, page, line, text,
paragraph (context) and its id as scalar fields, so ``--path``/``--type``/``--since`` filter
inside the engine.  BM25's idf and the hybrid's per-field maxima need each key's posting count
and largest weight (``query/fusion.py``): the ``<collection>_keys`` collection keeps them, with
a few meta rows (negative keys), updated with every write.

A write marks the statistics dirty first and clean last; a store found dirty (a writer killed
in between) recounts them from the entities, so re-indexing after a crash converges.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sparc_local.errors import SparcError
from sparc_local.index import postings as codec
from sparc_local.model.lexical import FIELD_BASE, PARAGRAPH_FIELD, SENTENCE_FIELD
from sparc_local.paths import STORE_ENV

SCHEME = "milvus://"
LITE_SUFFIX = ".db"
DEFAULT_COLLECTION = "sparc_local"
TOKEN_ENV = "MILVUS_TOKEN"  # user:password or an API key, for a server that requires one
KEYS_SUFFIX = "_keys"
# the sparse fields by posting-key field (fusion.keys): SPARC's tokens, BM25 of sentence and paragraph
FIELDS = {0: "sparc", SENTENCE_FIELD: "bm25_sentence", PARAGRAPH_FIELD: "bm25_context"}
# Milvus refuses an empty sparse vector: a sentence with no posting in a field gets this key
# (token 0, [PAD], which no question holds) with the smallest weight
PLACEHOLDER = 0
TEXT_MAX = 65535  # Milvus's VARCHAR limit (bytes); longer paragraphs are cut (shown only)
PATH_MAX = 4096
INSERT_ROWS = 2000  # entities per insert call
IN_CHUNK = 4000  # ids per `id in [...]` filter
# meta rows of the keys collection
META_SENTENCES, META_DIRTY, META_ROOTS, META_SCALE = -1, -2, -3, -4


class MilvusError(SparcError):
    """The Milvus server (or Milvus Lite) refused a request or cannot be reached."""


@dataclass(frozen=True)
class StoreStatus:
    """The Milvus store ``SPARC_LOCAL_STORE`` names (``backend.store_status``): its entities, and
    whether they are the local index's encoded sentences (a killed writer's record, or an index
    built before the store was named, leaves them apart)."""

    store: str  # as named
    sentences: int | None  # entities in its collection; None: it could not be read
    in_step: bool  # as many as the index's encoded sentences, and no write left unfinished
    error: str | None = None  # why it could not be read


@dataclass(frozen=True)
class StoreSpec:
    """Where the store is: ``uri`` as pymilvus takes it (http://HOST:PORT or a Lite file) and the
    collection.  ``milvus://HOST:PORT/COLLECTION`` names a server; a path ending in ``.db``
    (optionally ``#COLLECTION``) a Milvus Lite file, run by pymilvus on this machine."""

    uri: str
    collection: str

    @classmethod
    def parse(cls, text: str) -> StoreSpec:
        text = text.strip()
        if text.startswith(SCHEME):
            rest = text[len(SCHEME):]
            host, _, coll = rest.partition("/")
            if not host or ":" not in host:
                raise SparcError(f'"{text}" does not name a Milvus server',
                                 f"Write it as {SCHEME}HOST:PORT/COLLECTION (e.g. {SCHEME}localhost:19530/docs).")
            return cls(f"http://{host}", _collection(coll or DEFAULT_COLLECTION, text))
        path, _, coll = text.partition("#")
        if not path.endswith(LITE_SUFFIX):
            raise SparcError(f'"{text}" is neither a Milvus server nor a Milvus Lite file',
                             f"Use {SCHEME}HOST:PORT/COLLECTION, or a file name ending in {LITE_SUFFIX}.")
        return cls(os.path.abspath(os.path.expanduser(path)), _collection(coll or DEFAULT_COLLECTION, text))

    @property
    def is_lite(self) -> bool:
        return not self.uri.startswith("http")

    @property
    def text(self) -> str:
        """As ``parse`` reads it, a Lite file's path absolute (for a service, which runs elsewhere)."""
        if self.is_lite:
            return f"{self.uri}#{self.collection}"
        return f"{SCHEME}{self.uri.removeprefix('http://')}/{self.collection}"


def _collection(name: str, text: str) -> str:
    if not name.replace("_", "").isalnum() or name[0].isdigit():
        raise SparcError(f'"{name}" in "{text}" is not a Milvus collection name',
                         "Use letters, digits and underscores, starting with a letter.")
    return name


@contextlib.contextmanager
def engine(spec: StoreSpec, what: str) -> Iterator[None]:
    """Errors of the engine and its client as a ``MilvusError`` with what to do."""
    try:
        yield
    except SparcError:
        raise
    except Exception as err:  # pymilvus raises MilvusException, grpc errors, ConnectionError...
        if type(err).__module__.split(".")[0] not in ("pymilvus", "grpc", "milvus_lite") \
                and not isinstance(err, (ConnectionError, OSError, TimeoutError)):
            raise
        where = spec.uri if not spec.is_lite else f"the Milvus Lite file {spec.uri}"
        raise MilvusError(f"Milvus could not {what} ({type(err).__name__}: {err})",
                          f"Check that {where} is reachable and its collection {spec.collection} usable; "
                          f"unset {STORE_ENV} to use the local index.") from None


def client(spec: StoreSpec) -> Any:
    """A connected ``MilvusClient`` (imports pymilvus: the extra ``[milvus]``)."""
    try:
        from pymilvus import MilvusClient
    except ImportError:
        raise MilvusError("pymilvus is not installed",
                          "Install the extra: pip install 'sparc-local[milvus]'.") from None
    import logging

    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)  # its errors reach the user as MilvusError
    token = os.environ.get(TOKEN_ENV, "")
    # Milvus Lite's in-process server answers pymilvus's 10 s keepalive pings with GOAWAY
    # "too_many_pings" and the connection then fails: no idle pings to it
    options = {"grpc_options": {"grpc.keepalive_time_ms": 3_600_000, "grpc.keepalive_permit_without_calls": 0}} \
        if spec.is_lite else {}
    with engine(spec, "connect"):
        return MilvusClient(spec.uri, token=token, **options) if token else MilvusClient(spec.uri, **options)


@dataclass
class Entity:
    """One sentence as the store writes it."""

    id: int
    path: str
    mtime: float
    text: str
    context: str
    offset: int
    page: int | None
    line: int | None
    context_id: int
    fields: dict[str, dict[int, float]]  # FIELDS' names -> token id -> stored value


def file_type(path: str) -> str:
    return os.path.splitext(path)[1].lower()[:32]


def _cut(text: str, limit: int) -> str:
    raw = text.encode("utf-8")
    return text if len(raw) <= limit else raw[:limit].decode("utf-8", "ignore")


def _in(name: str, values: Sequence[int]) -> str:
    return f"{name} in [{','.join(map(str, values))}]"


def quote(text: str) -> str:
    """A string literal of Milvus's filter expressions."""
    return json.dumps(text)


def path_under(prefix: str) -> str:
    """The filter of the entities at or below ``prefix``."""
    folder = prefix.rstrip("/") + "/"
    like = folder.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"path == {quote(prefix)} or path like {quote(like + '%')}"


class MilvusStore:
    """The two collections of one store: create them (``create=True``), write and delete files'
    sentences with their key statistics, and read what a question needs."""

    def __init__(self, spec: StoreSpec, *, create: bool = False) -> None:
        self.spec = spec
        self.name, self.keys = spec.collection, spec.collection + KEYS_SUFFIX
        self.client = client(spec)
        with engine(spec, "open the collections"):
            have = self.client.has_collection(self.name) and self.client.has_collection(self.keys)
            if not have and not create:
                raise MilvusError(f"the Milvus collection {self.name} does not exist",
                                  "Index into it first: SPARC_LOCAL_STORE=... sparc-local index FOLDER.")
            if not have:
                self._create()
            self.client.load_collection(self.name)
            self.client.load_collection(self.keys)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()

    def __enter__(self) -> MilvusStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create(self) -> None:
        from pymilvus import DataType

        c = self.client
        s = c.create_schema(auto_id=False)
        s.add_field("id", DataType.INT64, is_primary=True)
        for name in FIELDS.values():
            s.add_field(name, DataType.SPARSE_FLOAT_VECTOR)
        s.add_field("path", DataType.VARCHAR, max_length=PATH_MAX)
        s.add_field("ftype", DataType.VARCHAR, max_length=32)
        s.add_field("mtime", DataType.DOUBLE)
        s.add_field("page", DataType.INT64)  # -1: none
        s.add_field("line", DataType.INT64)
        s.add_field("text", DataType.VARCHAR, max_length=TEXT_MAX)
        s.add_field("context", DataType.VARCHAR, max_length=TEXT_MAX)
        s.add_field("offset", DataType.INT64)
        s.add_field("context_id", DataType.INT64)
        ip = c.prepare_index_params()
        for name in FIELDS.values():
            ip.add_index(name, index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
        ip.add_index("path", index_type="INVERTED")
        ip.add_index("ftype", index_type="INVERTED")
        ip.add_index("mtime", index_type="INVERTED")
        c.create_collection(self.name, schema=s, index_params=ip, consistency_level="Strong")
        k = c.create_schema(auto_id=False)
        k.add_field("key", DataType.INT64, is_primary=True)
        k.add_field("df", DataType.INT64)
        k.add_field("maxq", DataType.INT64)
        k.add_field("value", DataType.VARCHAR, max_length=TEXT_MAX)
        k.add_field("v", DataType.FLOAT_VECTOR, dim=2)  # Milvus wants a vector field in every collection
        kp = c.prepare_index_params()
        kp.add_index("v", index_type="FLAT", metric_type="L2")
        c.create_collection(self.keys, schema=k, index_params=kp, consistency_level="Strong")
        self._put_meta({META_DIRTY: (0, ""), META_SENTENCES: (0, ""),
                        META_SCALE: (0, repr(codec.scale_for_ceiling())), META_ROOTS: (0, "[]")})

    # ------------------------------------------------------------------ meta and statistics

    def _put_meta(self, rows: dict[int, tuple[int, str]]) -> None:
        self.client.upsert(self.keys, [{"key": k, "df": n, "maxq": 0, "value": v, "v": [0.0, 0.0]}
                                       for k, (n, v) in rows.items()])

    def _meta(self, keys: Sequence[int]) -> dict[int, tuple[int, str]]:
        rows = self.client.query(self.keys, filter=_in("key", keys), output_fields=["key", "df", "value"])
        return {r["key"]: (r["df"], r["value"]) for r in rows}

    @property
    def weight_scale(self) -> float:
        with engine(self.spec, "read the weight scale"):
            return float(self._meta([META_SCALE])[META_SCALE][1])

    def roots(self) -> list[str]:
        with engine(self.spec, "read the indexed folders"):
            return json.loads(self._meta([META_ROOTS]).get(META_ROOTS, (0, "[]"))[1])

    def set_roots(self, roots: Iterable[str]) -> None:
        with engine(self.spec, "write the indexed folders"):
            self._put_meta({META_ROOTS: (0, json.dumps(sorted(roots)))})

    def key_stats(self, keys: Sequence[int]) -> tuple[list[int], list[int], int]:
        """(df, largest stored value) of each posting key (0, 0 when absent), and the number of
        sentences: what ``fusion.multipliers`` needs."""
        with engine(self.spec, "read the key statistics"):
            got: dict[int, tuple[int, int]] = {}
            want = [int(k) for k in keys] + [META_SENTENCES]
            for i in range(0, len(want), IN_CHUNK):
                for r in self.client.query(self.keys, filter=_in("key", want[i:i + IN_CHUNK]),
                                           output_fields=["key", "df", "maxq"]):
                    got[r["key"]] = (r["df"], r["maxq"])
        n = got.get(META_SENTENCES, (0, 0))[0]
        return [got.get(int(k), (0, 0))[0] for k in keys], [got.get(int(k), (0, 0))[1] for k in keys], n

    def _add_stats(self, entities: Iterable[dict], sign: int) -> None:
        """Add (sign 1) or take away (-1) the postings of ``entities`` from the key statistics.
        A key's largest value only grows (an upper bound after deletes, as fusion.py allows)."""
        df: dict[int, int] = {}
        mq: dict[int, int] = {}
        n = 0
        for e in entities:
            n += 1
            for field, name in FIELDS.items():
                for tok, v in e[name].items():
                    if v < 1:  # the placeholder
                        continue
                    key = field * FIELD_BASE + int(tok)
                    df[key] = df.get(key, 0) + 1
                    mq[key] = max(mq.get(key, 0), int(v))
        if not n:
            return
        keys = list(df)
        old = {}
        for i in range(0, len(keys), IN_CHUNK):
            for r in self.client.query(self.keys, filter=_in("key", keys[i:i + IN_CHUNK]),
                                       output_fields=["key", "df", "maxq"]):
                old[r["key"]] = (r["df"], r["maxq"])
        rows = [{"key": k, "df": max(0, old.get(k, (0, 0))[0] + sign * d), "maxq": max(old.get(k, (0, 0))[1], mq[k]),
                 "value": "", "v": [0.0, 0.0]} for k, d in df.items()]
        total = self._meta([META_SENTENCES]).get(META_SENTENCES, (0, ""))[0] + sign * n
        for i in range(0, len(rows), INSERT_ROWS):
            self.client.upsert(self.keys, rows[i:i + INSERT_ROWS])
        self._put_meta({META_SENTENCES: (max(0, total), "")})

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Marks the statistics dirty while entities and statistics change (see the module doc)."""
        if self._meta([META_DIRTY]).get(META_DIRTY, (0, ""))[0]:
            self.recount()
        self._put_meta({META_DIRTY: (1, "")})
        yield
        self._put_meta({META_DIRTY: (0, "")})

    def recount(self) -> None:
        """The key statistics counted again from every entity (after a killed writer)."""
        with engine(self.spec, "recount the key statistics"):
            old = [r["key"] for r in self._iterate(self.keys, "key >= 0", ["key"])]
            for i in range(0, len(old), IN_CHUNK):
                self.client.delete(self.keys, filter=_in("key", old[i:i + IN_CHUNK]))
            self._put_meta({META_SENTENCES: (0, "")})
            batch: list[dict] = []
            for e in self._iterate(self.name, "id >= 0", list(FIELDS.values())):
                batch.append(e)
                if len(batch) >= 10 * INSERT_ROWS:
                    self._add_stats(batch, 1)
                    batch = []
            self._add_stats(batch, 1)

    def _iterate(self, collection: str, expr: str, fields: list[str]) -> Iterator[dict]:
        it = self.client.query_iterator(collection, filter=expr, output_fields=fields, batch_size=1000)
        try:
            while True:
                rows = it.next()
                if not rows:
                    return
                yield from rows
        finally:
            it.close()

    # ------------------------------------------------------------------ writes

    def replace(self, paths: Sequence[str], entities: Sequence[Entity]) -> None:
        """Every entity of ``paths`` deleted, then ``entities`` written (files' new state; no
        entities removes the files).  Upserts by id: re-running it after a crash gives the same store."""
        with engine(self.spec, "write sentences"), self._writing():
            for expr in [_in_paths(paths[i:i + 200]) for i in range(0, len(paths), 200)]:
                self._delete(expr)
            rows = [_row(e) for e in entities]
            for i in range(0, len(rows), INSERT_ROWS):
                self.client.upsert(self.name, rows[i:i + INSERT_ROWS])
            self._add_stats(rows, 1)

    def remove_under(self, prefix: str) -> int:
        """Every entity at or below ``prefix`` deleted; returns how many."""
        with engine(self.spec, "delete sentences"), self._writing():
            return self._delete(path_under(prefix))

    def _delete(self, expr: str) -> int:
        gone = list(self._iterate(self.name, expr, ["id", *FIELDS.values()]))
        ids = [e["id"] for e in gone]
        for i in range(0, len(ids), IN_CHUNK):
            self.client.delete(self.name, filter=_in("id", ids[i:i + IN_CHUNK]))
        self._add_stats(gone, -1)
        return len(ids)

    def seal(self) -> None:
        """Seal what was written into indexed segments, at the end of a run's writes. Milvus Lite
        keeps new rows in a memory table whose index it rebuilds on every search (on squad-dev's
        10,642 sentences: 2.5 s a search unsealed, 93 ms sealed); a cluster seals on its own, and
        its flush is cheap when nothing is pending."""
        with engine(self.spec, "seal the written sentences"):
            self.client.flush(self.name)
            self.client.flush(self.keys)

    def compact(self) -> None:
        """Ask the engine to rewrite its segments without deleted entities (``forget``)."""
        with engine(self.spec, "compact"):
            self.client.compact(self.name)
            self.client.compact(self.keys)

    # ------------------------------------------------------------------ reads

    def count(self) -> tuple[int, int]:
        """(files, sentences)."""
        with engine(self.spec, "count"):
            n = self._meta([META_SENTENCES]).get(META_SENTENCES, (0, ""))[0]
            paths = {r["path"] for r in self._iterate(self.name, "id >= 0", ["path"])}
        return len(paths), n

    def entity_count(self) -> int:
        """The sentences in the collection, counted by the engine (not the key statistics)."""
        with engine(self.spec, "count"):
            return int(self.client.query(self.name, filter="", output_fields=["count(*)"])[0]["count(*)"])

    def vectors(self, ids: Sequence[int], fields: Sequence[str]) -> dict[int, dict]:
        """The entities ``ids`` with ``fields``, by id."""
        out: dict[int, dict] = {}
        with engine(self.spec, "read sentences"):
            for i in range(0, len(ids), IN_CHUNK):
                for r in self.client.query(self.name, filter=_in("id", ids[i:i + IN_CHUNK]),
                                           output_fields=["id", *fields]):
                    out[r["id"]] = r
        return out


def _in_paths(paths: Sequence[str]) -> str:
    return f"path in [{','.join(quote(p) for p in paths)}]"


def _row(e: Entity) -> dict:
    return {"id": e.id, **e.fields, "path": _cut(e.path, PATH_MAX), "ftype": file_type(e.path), "mtime": float(e.mtime),
            "page": -1 if e.page is None else e.page, "line": -1 if e.line is None else e.line,
            "text": _cut(e.text, TEXT_MAX), "context": _cut(e.context, TEXT_MAX), "offset": e.offset,
            "context_id": e.context_id}
