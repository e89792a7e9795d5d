"""sparc-local on Milvus (optional extra ``[milvus]``): the same sentences, filters and fused
ranking in a distributed engine, or in Milvus Lite's embedded one.  See docs/milvus.md.

Nothing here is imported by the default ``ask`` path: pymilvus loads only when a store is named.
"""
