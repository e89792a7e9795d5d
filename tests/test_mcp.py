"""`sparc-local mcp`: started over stdio by the SDK's own client, it lists its tools, answers a
`search` on a small index, and offers `index` and `forget` only with --allow-changes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.cli.app import app
from sparc_local.model.info import RERANKER_VAR

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.usefixtures("active_tiny")
runner = CliRunner()


async def _session(home: Path, *args: str, calls: list[tuple[str, dict]]) -> tuple[set[str], list]:
    """The server's tool names, and the result of each call in ``calls``."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "sparc_local", "mcp", *args], cwd=str(REPO),
                                   env={"SPARC_LOCAL_HOME": str(home), "PYTHONPATH": str(REPO),
                                        "PATH": os.environ.get("PATH", ""),
                                        RERANKER_VAR: os.environ[RERANKER_VAR]})  # as the CLI here: conftest's
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name for t in (await session.list_tools()).tools}
        results = [await session.call_tool(name, arguments) for name, arguments in calls]
    return tools, results


def _data(result) -> dict:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def test_search_and_status_over_stdio_and_no_changes_without_the_flag(docs: Path, sparc_home: Path):
    pytest.importorskip("mcp")
    assert runner.invoke(app, ["index", str(docs), "-q"]).exit_code == 0
    expected = json.loads(runner.invoke(app, ["ask", "green tea steep", "--json", "-k", "2"]).output)
    tools, (found, filtered, status, refused) = asyncio.run(_session(sparc_home, calls=[
        ("search", {"question": "green tea steep", "k": 2}),
        ("search", {"question": "when was the tower built", "path": "city", "type": "txt", "since": "2020-01-01",
                    "mode": "bm25"}),
        ("status", {}),
        ("index", {"paths": [str(docs)]}),
    ]))
    assert tools == {"search", "status"}
    answers = _data(found)["answers"]
    assert [(a["path"], a["line"], a["sentence"], a["context"], a["score"], a["likely"]) for a in answers] == [
        (e["path"], e["line"], e["sentence"], e["context"], e["score"], e["likely"]) for e in expected]
    assert {a["path"] for a in _data(filtered)["answers"]} == {str(docs / "city.txt")}
    assert _data(status)["files"] == 2 and _data(status)["roots"] == [str(docs)]
    assert refused.is_error and "index" in refused.content[0].text


def test_changes_with_the_flag_and_errors_with_their_remedy(docs: Path, sparc_home: Path):
    pytest.importorskip("mcp")
    tools, (indexed, forgot, again) = asyncio.run(_session(sparc_home, "--allow-changes", calls=[
        ("index", {"paths": [str(docs)]}),
        ("forget", {"path": str(docs / "city.txt")}),
        ("forget", {"path": str(docs / "city.txt")}),
    ]))
    assert tools == {"search", "status", "index", "forget"}
    assert _data(indexed)["indexed"] == 2 and _data(forgot)["files"] == 1
    assert again.is_error and again.content[0].text.endswith(  # after the SDK's "Error executing tool forget: "
        f"{docs / 'city.txt'} is not in the index\n`sparc-local status` lists the indexed folders.")


def test_without_the_sdk_the_command_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp... raises ImportError
    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)
    result = runner.invoke(app, ["mcp"])
    assert (result.exit_code, result.output) == (
        1, "Error: the MCP server needs the mcp package, which is not installed\n"
           "Install it with: pip install 'sparc-local[mcp]'\n")


def test_the_ask_path_never_imports_the_sdk(docs: Path):
    import subprocess

    assert runner.invoke(app, ["index", str(docs), "-q"]).exit_code == 0
    code = ("import sys; from sparc_local.cli.entry import main; assert main(['ask', 'green tea']) == 0; "
            "from sparc_local import Library; Library().ask('green tea'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'pydantic', 'anyio') or m == 'sparc_local.mcp_server'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
