"""The application layer: typed requests in, typed results out, for every front end.

The CLI (both `ask` parsers), the Python API (``library.Library``), the MCP server, the watcher's
handoff, `eval` and `service` reach the engines only through ``run``.  Importing this package
imports nothing: the cold `ask` path pays only for the modules it uses.
"""
