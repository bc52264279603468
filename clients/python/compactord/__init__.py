"""Typed Python client for compactord (compactor.v1.CompactorService).

    from compactord import Client

    with Client("localhost:50051", tenant="acme") as c:
        body = c.compact_body(openai_body, to="anthropic", context_window=200_000)

A model offered the recall_context tool (CompactResponse.recall_tool) gets its calls
answered with ``c.recall(conversation, call_input)``.

The generated message types are re-exported: ``compactord.pb`` (requests, responses, Policy,
Provider) and ``compactord.ir`` (Message, Part and the rest of the conversation form).
"""

from ._gen.compactor.v1 import compactor_pb2 as pb
from ._gen.compactor.v1 import conversation_pb2 as ir
from .client import PROVIDERS, Client, CompactordError
from .recall import TOOL_NAME as RECALL_TOOL_NAME
from .recall import RecallError, message_text

__all__ = ["Client", "CompactordError", "PROVIDERS", "RECALL_TOOL_NAME", "RecallError", "message_text", "pb", "ir"]
