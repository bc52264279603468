"""The client's own behaviour against a scripted in-process server: retries on UNAVAILABLE
through the service config, none on other codes, metadata on every call, deadlines."""

import threading
import time
from concurrent import futures

import grpc
import pytest

from compactord import Client, CompactordError, pb
from compactord._gen.compactor.v1 import compactor_pb2_grpc


class Scripted(compactor_pb2_grpc.CompactorServiceServicer):
    """Fails Lift with the scripted codes in turn, then answers; records each call's metadata."""

    def __init__(self, codes=(), delay=0.0):
        self.codes = list(codes)
        self.delay = delay
        self.calls = []
        self.lock = threading.Lock()

    def Lift(self, request, context):
        with self.lock:
            self.calls.append(dict(context.invocation_metadata()))
            code = self.codes.pop(0) if self.codes else None
        time.sleep(self.delay)
        if code is not None:
            context.abort(code, "scripted")
        return pb.LiftResponse(provider=pb.PROVIDER_OPENAI_CHAT, rest_body="{}")


@pytest.fixture
def scripted():
    servers = []

    def start(**kw):
        s = Scripted(**kw)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        compactor_pb2_grpc.add_CompactorServiceServicer_to_server(s, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return s, f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(None)


def test_retries_unavailable(scripted):
    s, addr = scripted(codes=[grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE])
    with Client(addr) as c:
        c.lift("{}")
    assert len(s.calls) == 3


def test_no_retry_when_disabled_or_not_transient(scripted):
    s, addr = scripted(codes=[grpc.StatusCode.UNAVAILABLE])
    with Client(addr, retries=False) as c, pytest.raises(CompactordError) as e:
        c.lift("{}")
    assert e.value.code == grpc.StatusCode.UNAVAILABLE and len(s.calls) == 1
    s, addr = scripted(codes=[grpc.StatusCode.INVALID_ARGUMENT])
    with Client(addr) as c, pytest.raises(CompactordError) as e:
        c.lift("{}")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and len(s.calls) == 1


def test_gives_up_after_four_attempts(scripted):
    s, addr = scripted(codes=[grpc.StatusCode.UNAVAILABLE] * 10)
    with Client(addr) as c, pytest.raises(CompactordError):
        c.lift("{}")
    assert len(s.calls) == 4


def test_metadata_on_every_call(scripted):
    s, addr = scripted()
    with Client(addr, tenant="acme", token="tok", api_key="key") as c:
        c.lift("{}")
    md = s.calls[0]
    assert md["x-compactor-tenant"] == "acme"
    assert md["authorization"] == "Bearer tok"
    assert md["x-api-key"] == "key"


def test_deadline(scripted):
    s, addr = scripted(delay=2.0)
    with Client(addr, timeout=0.2) as c, pytest.raises(CompactordError) as e:
        c.lift("{}")
    assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
