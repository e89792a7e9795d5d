"""Every condition a user can fix ends as `Error: <message>`, a remedy line and exit code 1: no
traceback. Real files, a real SQLite index, the tiny model."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.cli.app import app
from sparc_local.index.store import SCHEMA_VERSION, Index
from sparc_local.model.info import ACTIVE_POINTER, CONFIG_FILE, ModelInfo, shipped_model_dir
from sparc_local.paths import db_path

pytestmark = pytest.mark.usefixtures("active_tiny")

runner = CliRunner()
COMMANDS = [["ask", "green tea"], ["status"], ["index", "-q"]]
CORRUPT_REMEDY = "Move it away, then run `sparc-local index FOLDER` to build it again (your files are not touched)."
DATA_DIR_REMEDY = "Make it a folder you can read and write, or set SPARC_LOCAL_HOME to another folder."
FOLDER_REMEDY = "Give a model folder exported by sparc-local (sparc.json, model.onnx and tokenizer.json)."


def fails(args: list[str], message: str, remedy: str) -> None:
    """The command exits 1 with exactly `Error: message` and the remedy on stderr, nothing on stdout."""
    result = runner.invoke(app, args, catch_exceptions=False)  # any other exception fails the test
    assert "Traceback" not in result.output
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", f"Error: {message}\n{remedy}\n")


def _indexed(docs: Path) -> Path:
    assert runner.invoke(app, ["index", str(docs), "-q"]).exit_code == 0
    return db_path()


# ------------------------------------------------------------------------------------ the index


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_index_of_random_bytes(args: list[str]):
    db = db_path()
    db.write_bytes(random.Random(0).randbytes(8192))
    fails(args, f"the index {db} is damaged (file is not a database)", CORRUPT_REMEDY)


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_truncated_index(docs: Path, args: list[str]):
    db = _indexed(docs)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])
    fails(args, f"the index {db} is damaged (database disk image is malformed)", CORRUPT_REMEDY)


def test_damage_found_by_a_query(docs: Path):
    """The database opens, and SQLite finds the damage only when `ask` reads the posting lists."""
    db = _indexed(docs)
    with sqlite3.connect(db) as con:
        page = con.execute("PRAGMA page_size").fetchone()[0]
        root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'postings'").fetchone()[0]
    con.close()
    with db.open("r+b") as fh:
        fh.seek((root - 1) * page)
        fh.write(b"\xff" * page)
    assert runner.invoke(app, ["status"]).exit_code == 0  # opening is fine
    fails(["ask", "green tea"], f"the index {db} is damaged (database disk image is malformed)", CORRUPT_REMEDY)


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_schema_newer_than_the_code(args: list[str]):
    db = db_path()
    Index(db).close()
    con = sqlite3.connect(db)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    fails(args, f"the index {db} was written by a newer sparc-local (schema version {SCHEMA_VERSION + 1}; "
                f"this one reads up to {SCHEMA_VERSION})",
          "Upgrade sparc-local, or move the index away and run `sparc-local index FOLDER` to build it again.")


def test_index_that_is_a_folder():
    db_path().mkdir()
    fails(["index", "-q"], f"cannot open the index {db_path()} (Is a directory)",
          "Make it a file you can read and write (chmod 600), or move it away.")


# ------------------------------------------------------------------------------------ the data folder


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_data_dir_that_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]):
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("SPARC_LOCAL_HOME", str(home))
    fails(args, f"the data folder {home} is a file, not a folder", DATA_DIR_REMEDY)


def test_data_dir_under_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("SPARC_LOCAL_HOME", str(tmp_path / "file" / "home"))
    fails(["ask", "green tea"], f"cannot create the data folder {tmp_path / 'file' / 'home'} (Not a directory)",
          DATA_DIR_REMEDY)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes a chmod 000 folder: nothing to deny")
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_data_dir_without_permissions(sparc_home: Path, args: list[str]):
    sparc_home.chmod(0)
    try:
        fails(args, f"the data folder {sparc_home} is not readable and writable by you", DATA_DIR_REMEDY)
    finally:
        sparc_home.chmod(0o700)


# ------------------------------------------------------------------------------------ the model


def _model_copy(tiny_model_dir: Path, folder: Path, sparc_home: Path) -> Path:
    shutil.copytree(tiny_model_dir, folder)
    (sparc_home / ACTIVE_POINTER).write_text(str(folder))
    return folder


def test_model_folder_without_config(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    fails(["eval", str(tmp_path), "--model", str(empty)],
          f"{empty} is not a sparc-local model folder (no {CONFIG_FILE})", FOLDER_REMEDY)


@pytest.mark.parametrize("args", [["ask", "green tea"], ["index", "-q"]], ids=lambda a: a[0])
def test_config_with_bad_json(tmp_path: Path, sparc_home: Path, tiny_model_dir: Path, docs: Path,
                              args: list[str]):
    _indexed(docs)
    model = _model_copy(tiny_model_dir, tmp_path / "m", sparc_home)
    (model / CONFIG_FILE).write_text("{bad")
    fails(args, f"{model / CONFIG_FILE} is damaged (Expecting property name enclosed in double quotes: "
                "line 1 column 2 (char 1))", FOLDER_REMEDY)
    status = runner.invoke(app, ["status", "--json"], catch_exceptions=False)
    assert status.exit_code == 0 and json.loads(status.stdout)["active_model"] is None


def test_config_without_a_field(tmp_path: Path, sparc_home: Path, tiny_model_dir: Path):
    model = _model_copy(tiny_model_dir, tmp_path / "m", sparc_home)
    cfg = json.loads((model / CONFIG_FILE).read_text())
    del cfg["skip_ids"]
    (model / CONFIG_FILE).write_text(json.dumps(cfg))
    fails(["ask", "green tea"], f"{model / CONFIG_FILE} is damaged (no 'skip_ids')", FOLDER_REMEDY)


# (the file's ModelInfo attribute, garbage for it, what the error says of the garbage, the command that reads it:
# `ask` reads the tokenizer only, never onnxruntime)
MODEL_FILES = [
    ("tokenizer_path", b"{bad", "is damaged (key must be a string at line 1 column 2)", ["ask", "green tea"]),
    ("onnx_path", random.Random(0).randbytes(4096), "is damaged: onnxruntime cannot load it (InvalidProtobuf)",
     ["index", "-q"]),
]


@pytest.mark.parametrize("damage", ["missing", "garbage"])
@pytest.mark.parametrize("attr, garbage, says, args", MODEL_FILES, ids=["tokenizer", "onnx"])
def test_model_file_missing_or_damaged(tmp_path: Path, sparc_home: Path, tiny_model_dir: Path, docs: Path,
                                       damage: str, attr: str, garbage: bytes, says: str, args: list[str]):
    _indexed(docs)
    model = _model_copy(tiny_model_dir, tmp_path / "m", sparc_home)
    file = getattr(ModelInfo.load(model), attr)
    if damage == "missing":
        file.unlink()
    else:
        file.write_bytes(garbage)
    (docs / "new.txt").write_text("The train station is by the river.\n")  # `index` has something to encode
    fails(args, f"{file} {'is missing' if damage == 'missing' else says}", FOLDER_REMEDY)


def test_graph_of_another_version(tmp_path: Path, sparc_home: Path, tiny_model_dir: Path, docs: Path):
    """A model.onnx whose inputs are not the ones this version feeds (a folder from another version):
    one line at load, not onnxruntime's error at the first batch."""
    from onnx import TensorProto, helper, save

    _indexed(docs)
    model = _model_copy(tiny_model_dir, tmp_path / "m", sparc_home)
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "length"])
    out = helper.make_tensor_value_info("weights", TensorProto.INT64, ["batch", "length"])
    graph = helper.make_graph([helper.make_node("Identity", ["input_ids"], ["weights"])], "other", [ids], [out])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx_model.ir_version = 8
    save(onnx_model, model / "model.onnx")
    (docs / "new.txt").write_text("The train station is by the river.\n")
    fails(["index", "-q"], f"{model / 'model.onnx'} was exported by another version of sparc-local "
                           "(no input attention_mask, token_type_ids, top_k)", FOLDER_REMEDY)


def test_model_v2_folder_is_refused(tmp_path: Path, sparc_home: Path, tiny_model_dir: Path, docs: Path):
    """sparc.json of model v2's window scheme (gone since tag v2-research): refused when read, by name."""
    _indexed(docs)
    model = _model_copy(tiny_model_dir, tmp_path / "m", sparc_home)
    cfg = json.loads((model / CONFIG_FILE).read_text())
    (model / CONFIG_FILE).write_text(json.dumps({**cfg, "scheme": "window", "marks": True, "reach": 2}))
    fails(["index", "-q"], f"{model / CONFIG_FILE} describes a model of input scheme 'window', which this version "
                           "of sparc-local does not run", FOLDER_REMEDY)


def test_damaged_adapted_model_is_reverted(sparc_home: Path, tiny_model_dir: Path):
    """An adapted version lives in the data dir; its remedy is `adapt --revert`, which works on it."""
    from sparc_local.paths import models_dir

    model = _model_copy(tiny_model_dir, models_dir() / "tiny-adapted", sparc_home)
    (model / CONFIG_FILE).write_text("[]")
    fails(["ask", "green tea"], f"{model / CONFIG_FILE} is damaged (list indices must be integers or slices, not str)",
          "Run `sparc-local adapt --revert` to go back to the model adapt started from.")
    result = runner.invoke(app, ["adapt", "--revert"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.output == f"Reverted to {ModelInfo.load(shipped_model_dir()).id}; re-encoded 0 sentences.\n"
    assert not (sparc_home / ACTIVE_POINTER).exists()


# ------------------------------------------------------------------------------------ the question


@pytest.mark.parametrize("question", ["?!", "... ;-)", "🙂"])
def test_question_without_a_usable_token(docs: Path, question: str):
    _indexed(docs)
    fails(["ask", question], f'the question "{question}" has no word to search for',
          "Ask with words: punctuation, symbols and characters the model does not know are ignored.")


@pytest.mark.parametrize("question", ["", "   "])
def test_empty_question_is_a_usage_error(question: str):
    result = runner.invoke(app, ["ask", question], catch_exceptions=False)
    assert result.exit_code == 2
    assert result.stderr == ("Usage: root ask [OPTIONS] QUESTION\nTry 'root ask --help' for help.\n\n"
                             "Error: Invalid value for 'QUESTION': the question is empty\n")


# ------------------------------------------------------------------------------------ the service file


def test_service_folder_under_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from sparc_local.watch import service

    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv(service.ENV_DIR, str(tmp_path / "file" / "units"))
    fails(["service", "install"], f"cannot write {service.service_path()} (Not a directory)",
          f"Check the permissions of {tmp_path / 'file' / 'units'}, or set {service.ENV_DIR} to another folder.")


# ------------------------------------------------------------------------------------ the real entry point


def test_entry_point_prints_no_traceback():
    """`python -m sparc_local` goes through the same handler: stderr holds the two lines, nothing else."""
    db = db_path()
    db.write_bytes(random.Random(0).randbytes(8192))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.run([sys.executable, "-m", "sparc_local", "ask", "green tea"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        1, "", f"Error: the index {db} is damaged (file is not a database)\n{CORRUPT_REMEDY}\n")
