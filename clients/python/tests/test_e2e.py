"""The client against the real compactord binary: lift, plan, compact (miss, then hit),
lower to Anthropic and Gemini, and errors read through the client's own types."""

import json
import os
import re
import socket
import subprocess
import sys

import grpc
import pytest

from compactord import Client, CompactordError, ir, pb

from conftest import ROOT

POLICY = pb.Policy(context_window=2500, summary_max_tokens=500)


def test_story(server, swe_body):
    with Client(server, tenant="py-story") as c:
        lifted = c.lift(swe_body)
        assert lifted.provider == pb.PROVIDER_OPENAI_CHAT
        assert json.loads(lifted.rest_body)["model"] == "gpt-4o"
        assert lifted.messages[0].role == ir.ROLE_SYSTEM

        plan = c.plan(pb.PlanRequest(messages=lifted.messages, policy=POLICY))
        assert plan.action == pb.ACTION_SUMMARIZE
        assert 0 < plan.cut_index < len(lifted.messages)

        req = pb.CompactRequest(messages=lifted.messages, policy=POLICY)
        miss = c.compact(req)
        assert miss.compacted
        assert miss.cache_status == pb.CACHE_STATUS_MISS
        assert miss.summary.requests_total >= 1
        hit = c.compact(req)
        assert hit.cache_status == pb.CACHE_STATUS_HIT
        assert hit.summary.text == miss.summary.text

        anthropic = json.loads(c.lower(pb.LowerRequest(messages=hit.messages, provider=pb.PROVIDER_ANTHROPIC_MESSAGES)).body)
        assert anthropic["system"].startswith("You are an autonomous software engineer")
        assert "<summary>" in json.dumps(anthropic["messages"][0])
        gemini = json.loads(c.lower(pb.LowerRequest(messages=hit.messages, provider=pb.PROVIDER_GEMINI)).body)
        assert gemini["contents"][0]["role"] == "user"
        assert "systemInstruction" in gemini


def test_compact_body_keeps_the_rest_of_the_body(server, swe_body):
    with Client(server) as c:
        out = json.loads(c.compact_body(swe_body, policy=POLICY))
        assert out["model"] == "gpt-4o" and out["tools"]
        assert len(out["messages"]) < len(json.loads(swe_body)["messages"])
        # Nothing to do: the conversation comes back as it was.
        same = json.loads(c.compact_body(swe_body, context_window=128000))
        assert len(same["messages"]) == len(json.loads(swe_body)["messages"])


def test_compact_body_to_another_provider_takes_its_base_body(server, swe_body):
    with Client(server) as c:
        out = json.loads(c.compact_body(swe_body, to="anthropic", policy=POLICY, strict=True,
                                        base_body={"model": "claude-sonnet-4-5", "max_tokens": 1024}))
        assert out["model"] == "claude-sonnet-4-5" and out["max_tokens"] == 1024
        # The input's tools, in Anthropic's form (issue 36: strict used to let them go).
        assert [t["name"] for t in out["tools"]] == ["bash", "str_replace_editor", "submit"]
        assert out["tools"][0]["input_schema"]["required"] == ["command"]
        assert out["messages"][0]["role"] == "user"
        # Without it, strict lowering names what Anthropic requires.
        with pytest.raises(CompactordError) as e:
            c.compact_body(swe_body, to="anthropic", policy=POLICY, strict=True)
        assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
        assert "max_tokens" in e.value.message


def test_compact_body_carries_tools_and_strict_names_what_it_cannot(server, swe_body):
    with Client(server) as c:
        gemini = json.loads(c.compact_body(swe_body, to="gemini", policy=POLICY, strict=True))
        decls = [d["name"] for t in gemini["tools"] for d in t.get("functionDeclarations", [])]
        assert decls == ["bash", "str_replace_editor", "submit"]
        seeded = json.loads(swe_body)
        seeded["seed"] = 7
        with pytest.raises(CompactordError) as e:
            c.compact_body(seeded, to="gemini", policy=POLICY, strict=True)
        assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
        assert "rest_body.seed" in e.value.message


def test_invalid_argument_names_the_field(server, swe_body):
    with Client(server) as c:
        msgs = list(c.lift(swe_body).messages)
        bad = ir.Message(role=ir.ROLE_ASSISTANT)  # a message needs at least one part
        with pytest.raises(CompactordError) as e:
            c.plan(pb.PlanRequest(messages=msgs + [bad], policy=POLICY))
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert e.value.field_violations and e.value.field_violations[0][0] == f"messages[{len(msgs)}].parts"
        assert not e.value.retryable
        with pytest.raises(CompactordError) as e:
            c.lift('{"prompt": "not a chat body"}')
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert [f for f, _ in e.value.field_violations] == ["body"]
        with pytest.raises(ValueError):
            c.compact_body(swe_body, to="claude", context_window=2500)


def _closed_addr():
    """A loopback address where nothing listens."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


def test_unreachable_server_is_unavailable():
    with Client(_closed_addr(), timeout=2, retries=False) as c:
        with pytest.raises(CompactordError) as e:
            c.lift("{}")
        assert e.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


EXAMPLE = ROOT / "clients" / "python" / "examples" / "quickstart.py"


def _run_example(addr, cwd):
    env = dict(os.environ, COMPACTORD_ADDR=addr, PYTHONPATH=str(ROOT / "clients" / "python"))
    return subprocess.run([sys.executable, str(EXAMPLE)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_quickstart_example_shows_a_compaction(server, tmp_path):
    """The README's Python example (examples/quickstart.py) shows a compaction happening:
    tokens before and after, the summary's first lines, the cache status; it runs from any
    folder (its conversation is found beside it, not in the working directory)."""
    for cwd in (ROOT, tmp_path):
        out = _run_example(server, cwd)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        before, after = re.fullmatch(
            r"(\d+) tokens before, at most (\d+) after \(14 messages -> \d+\); summary cache: (MISS|HIT)", lines[0]).group(1, 2)
        assert int(after) < int(before), out.stdout
        assert lines[1] == "summary, first lines:", out.stdout
        assert lines[2] == "  ## Where it stopped", out.stdout
        assert lines[3].startswith("  - last intent: "), out.stdout
        assert re.fullmatch(r"Anthropic body: \d+ bytes", lines[-1]), out.stdout


def test_quickstart_example_without_a_server(tmp_path):
    """Pointed at a port where nothing listens, the example prints one line saying what to
    check, no traceback, and exits non-zero."""
    addr = _closed_addr()
    out = _run_example(addr, tmp_path)
    assert out.returncode != 0
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"quickstart: no compactord at {addr} (UNAVAILABLE): "), out.stderr
    assert "COMPACTORD_ADDR" in out.stderr and "Traceback" not in out.stderr


def test_coexists_with_googleapis_common_protos():
    """googleapis-common-protos registers google/rpc/status.proto in the default pool; the
    package's own copies live in compactord.rpc, so both import in either order."""
    script = """
import sys
from google.protobuf import descriptor_pb2, descriptor_pool
def register_google_rpc():
    f = descriptor_pb2.FileDescriptorProto(name="google/rpc/status.proto", package="google.rpc", syntax="proto3")
    m = f.message_type.add(name="Status")
    m.field.add(name="code", number=1, type=5, label=1)
    descriptor_pool.Default().Add(f)
if sys.argv[1] == "first":
    register_google_rpc()
import compactord
if sys.argv[1] == "after":
    register_google_rpc()
print("ok")
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "clients" / "python"))
    for order in ("first", "after"):
        out = subprocess.run([sys.executable, "-c", script, order], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and out.stdout.strip() == "ok", (order, out.stderr)
