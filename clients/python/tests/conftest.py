"""Starts the real compactord binary for the suite: built from this repository with `go
build` (or COMPACTORD_BIN), on a free loopback port, stopped at the end."""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "clients" / "python"))

FIXTURES = ROOT / "internal" / "corpus" / "testdata"


def _binary(tmp: pathlib.Path) -> str:
    if os.environ.get("COMPACTORD_BIN"):
        return os.environ["COMPACTORD_BIN"]
    out = tmp / "compactord"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/compactord"], cwd=ROOT, check=True)
    return str(out)


@pytest.fixture(scope="session")
def server():
    """The address of a running compactord (in-memory cache, extractive summarizer)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [_binary(pathlib.Path(tmp)), "--listen", "127.0.0.1:0", "--metrics-listen", ""],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        )
        addr = None
        for line in proc.stderr:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("msg") == "serving":
                addr = rec["addr"]
                break
        if addr is None:
            proc.kill()
            raise RuntimeError("compactord exited before serving")
        # Keep reading its log so it never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        try:
            yield addr
        finally:
            proc.terminate()
            proc.wait(timeout=30)


@pytest.fixture
def swe_body() -> str:
    """A real agent conversation as an OpenAI Chat request body (the project's fixture)."""
    return (FIXTURES / "fixture-swe-units.openai.json").read_text()
