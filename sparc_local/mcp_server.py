"""`sparc-local mcp`: the index as a search tool for a local AI assistant, over the Model Context
Protocol on stdin/stdout (the official ``mcp`` SDK, the optional extra ``[mcp]``).

Its tools call ``Library``, the Python API, so they answer as `ask` and `status` do.  Read-only
unless the server is started with ``allow_changes``: only then does it offer ``index`` and
``forget``.  stdout carries the protocol, so nothing else may print there (the library never
prints).  Imported only by the `mcp` command: no other path loads the SDK.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Literal

from sparc_local.errors import SparcError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from sparc_local.app.library import Library

INSTALL = "pip install 'sparc-local[mcp]'"
SEARCH_FIELDS = ("rank", "path", "page", "line", "sentence", "context", "heading", "score", "likely")
INSTRUCTIONS = ("Searches the user's own files, indexed on this machine, for the sentences that answer a "
                "question. Each answer gives the file's path, its page (PDF, slides) or line (text), the "
                "sentence, the passage around it, a score, and in hybrid mode whether it is a likely answer.")


class McpMissing(SparcError):
    """`sparc-local mcp` without the SDK installed."""


def _sdk() -> tuple[type[MCPServer], type[Exception]]:
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        raise McpMissing("the MCP server needs the mcp package, which is not installed",
                         f"Install it with: {INSTALL}") from None
    return MCPServer, ToolError


def server(library: Library, allow_changes: bool = False) -> MCPServer:
    """The MCP server over ``library``: ``search`` and ``status``, and with ``allow_changes``
    ``index`` and ``forget``.  A SparcError is the tool's error, with its remedy."""
    from sparc_local import __version__

    MCPServer, ToolError = _sdk()
    app = MCPServer("sparc-local", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    def told(err: SparcError) -> Exception:
        return ToolError(f"{err}\n{err.remedy}" if err.remedy else str(err))

    @app.tool(description="Find the sentences in the user's indexed files that answer a question. "
                          "path: only files whose path contains this text or matches this glob; type: only "
                          "this extension (pdf, md, ...); since/before: modified on or after / before a date "
                          "(YYYY-MM-DD); mode: hybrid (best), sparc or bm25.")
    def search(question: str, k: int = 5, path: str | None = None, type: str | None = None,
               since: str | None = None, before: str | None = None,
               mode: Literal["hybrid", "sparc", "bm25"] = "hybrid") -> dict[str, Any]:
        try:
            answers = library.ask(question, k=k, path=path, type=type, since=since, before=before, mode=mode)
        except SparcError as err:
            raise told(err) from None
        return {"answers": [{name: getattr(a, name) for name in SEARCH_FIELDS} for a in answers]}

    @app.tool(description="What is indexed: files, sentences, the indexed folders, the model, the files that "
                          "could not be read, and whether the watcher keeps the index up to date.")
    def status() -> dict[str, Any]:
        try:
            return library.status().to_json()
        except SparcError as err:
            raise told(err) from None

    if allow_changes:
        @app.tool(description="Index folders or files (none: refresh every folder indexed before); only new "
                              "and changed files are read.")
        def index(paths: list[str] | None = None) -> dict[str, Any]:
            try:
                return dataclasses.asdict(library.index(*(paths or [])))
            except SparcError as err:
                raise told(err) from None

        @app.tool(description="Remove a file or folder and all its sentences from the index.")
        def forget(path: str) -> dict[str, Any]:
            try:
                return dataclasses.asdict(library.forget(path))
            except SparcError as err:
                raise told(err) from None

    return app


def serve(allow_changes: bool = False) -> None:
    """Serve the default data dir's index on stdin/stdout until the client closes them."""
    from sparc_local.app.library import Library

    server(Library(), allow_changes).run("stdio")
