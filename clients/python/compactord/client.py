"""The Client and its error type."""

from __future__ import annotations

import json
from typing import Iterable, Mapping, Optional, Sequence, Tuple, Union

import grpc

from ._gen.compactor.v1 import compactor_pb2 as pb
from ._gen.compactor.v1 import compactor_pb2_grpc as pb_grpc
from ._gen.rpc import error_details_pb2, status_pb2
from .recall import DEFAULT_MAX_TOKENS, Answerer

# Metadata keys of compactord's tenant and credentials (SECURITY.md).
TENANT_KEY = "x-compactor-tenant"
API_KEY_KEY = "x-api-key"

PROVIDERS: Mapping[str, int] = {
    "anthropic": pb.PROVIDER_ANTHROPIC_MESSAGES,
    "openai-chat": pb.PROVIDER_OPENAI_CHAT,
    "openai-responses": pb.PROVIDER_OPENAI_RESPONSES,
    "gemini": pb.PROVIDER_GEMINI,
    "bedrock": pb.PROVIDER_BEDROCK_CONVERSE,
}
"""Provider names accepted wherever a provider is expected, as in compactctl's --to."""

# Retries UNAVAILABLE (transient: a replica draining, overloaded, a summarizer outage) with
# exponential backoff, through gRPC's own retry machinery and its throttling.
_SERVICE_CONFIG = json.dumps(
    {
        "methodConfig": [
            {
                "name": [{"service": "compactor.v1.CompactorService"}],
                "retryPolicy": {
                    "maxAttempts": 4,
                    "initialBackoff": "0.2s",
                    "maxBackoff": "3s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ]
    }
)

_MAX_MESSAGE_BYTES = 64 << 20

_DETAIL_TYPES = {
    "google.rpc." + t.DESCRIPTOR.name: t
    for t in (error_details_pb2.BadRequest, error_details_pb2.QuotaFailure,
              error_details_pb2.RetryInfo, error_details_pb2.ErrorInfo)
}


class CompactordError(Exception):
    """A call failed. ``code`` is the grpc.StatusCode; the google.rpc details compactord
    attaches are decoded: ``field_violations`` (BadRequest: which fields are invalid),
    ``quota_violations`` (QuotaFailure: which per-tenant limit was hit), ``retry_delay``
    (RetryInfo, seconds: when a retry may succeed; None means retrying will not help) and
    ``reason`` / ``metadata`` (ErrorInfo)."""

    def __init__(self, code: grpc.StatusCode, message: str, details: Sequence[object] = ()):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.field_violations: list[Tuple[str, str]] = []
        self.quota_violations: list[Tuple[str, str]] = []
        self.retry_delay: Optional[float] = None
        self.reason = ""
        self.metadata: dict[str, str] = {}
        for d in details:
            if isinstance(d, error_details_pb2.BadRequest):
                self.field_violations += [(v.field, v.description) for v in d.field_violations]
            elif isinstance(d, error_details_pb2.QuotaFailure):
                self.quota_violations += [(v.subject, v.description) for v in d.violations]
            elif isinstance(d, error_details_pb2.RetryInfo):
                self.retry_delay = d.retry_delay.ToTimedelta().total_seconds()
            elif isinstance(d, error_details_pb2.ErrorInfo):
                self.reason, self.metadata = d.reason, dict(d.metadata)

    @property
    def retryable(self) -> bool:
        """Whether the server says a retry may succeed (it sent RetryInfo)."""
        return self.retry_delay is not None

    @classmethod
    def from_rpc_error(cls, err: grpc.RpcError) -> "CompactordError":
        details = []
        for key, value in err.trailing_metadata() or ():
            if key != "grpc-status-details-bin":
                continue
            st = status_pb2.Status.FromString(value)
            for any_ in st.details:
                # The package's copies of google.rpc live in compactord.rpc (same fields, so
                # the same bytes): match the type by its google.rpc name.
                t = _DETAIL_TYPES.get(any_.type_url.rsplit("/", 1)[-1])
                if t is not None:
                    details.append(t.FromString(any_.value))
        return cls(err.code(), err.details() or "", details)


def provider(p: Union[str, int]) -> int:
    """The Provider enum value of a name ("anthropic", "openai-chat", …) or of a value."""
    if isinstance(p, int):
        return p
    try:
        return PROVIDERS[p]
    except KeyError:
        raise ValueError(f"unknown provider {p!r}; want one of {', '.join(PROVIDERS)}") from None


class Client:
    """A connection to compactord.

    address: host:port. Plaintext unless a TLS option is given: ``tls=True`` (system roots),
    ``root_certificates`` (PEM bytes of the CAs to trust), and for mutual TLS
    ``private_key`` and ``certificate_chain`` (PEM bytes). Credentials and tenant go on
    every call: ``token`` (a JWT, sent as ``authorization: Bearer``), ``api_key``
    (``x-api-key``), ``tenant`` (``x-compactor-tenant``; with authentication it may only
    repeat the identity's tenant, unless the identity is a gateway). ``timeout`` is each
    call's deadline in seconds. With ``retries`` (the default) UNAVAILABLE is retried with
    backoff by gRPC's service config.
    """

    def __init__(
        self,
        address: str,
        *,
        tenant: Optional[str] = None,
        token: Optional[str] = None,
        api_key: Optional[str] = None,
        tls: bool = False,
        root_certificates: Optional[bytes] = None,
        private_key: Optional[bytes] = None,
        certificate_chain: Optional[bytes] = None,
        timeout: float = 60.0,
        retries: bool = True,
        options: Iterable[Tuple[str, object]] = (),
    ):
        opts = [
            ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
            ("grpc.enable_retries", 1 if retries else 0),
        ]
        if retries:
            opts.append(("grpc.service_config", _SERVICE_CONFIG))
        opts += list(options)
        if tls or root_certificates or certificate_chain:
            creds = grpc.ssl_channel_credentials(root_certificates, private_key, certificate_chain)
            self._channel = grpc.secure_channel(address, creds, options=opts)
        else:
            self._channel = grpc.insecure_channel(address, options=opts)
        self._stub = pb_grpc.CompactorServiceStub(self._channel)
        self._metadata = []
        if tenant:
            self._metadata.append((TENANT_KEY, tenant))
        if token:
            self._metadata.append(("authorization", "Bearer " + token))
        if api_key:
            self._metadata.append((API_KEY_KEY, api_key))
        self.timeout = timeout

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method, request, timeout: Optional[float]):
        try:
            return method(request, timeout=timeout or self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise CompactordError.from_rpc_error(e) from None

    def plan(self, request: pb.PlanRequest, *, timeout: Optional[float] = None) -> pb.PlanResponse:
        """What compaction a conversation needs under a policy, and why; calls no model."""
        return self._call(self._stub.Plan, request, timeout)

    def compact(self, request: pb.CompactRequest, *, timeout: Optional[float] = None) -> pb.CompactResponse:
        """Compact a conversation: prune old tool outputs, summarize old turns (cached)."""
        return self._call(self._stub.Compact, request, timeout)

    def lower(self, request: pb.LowerRequest, *, timeout: Optional[float] = None) -> pb.LowerResponse:
        """Render a conversation as a provider's request body."""
        return self._call(self._stub.Lower, request, timeout)

    def expand(self, request: pb.ExpandRequest, *, timeout: Optional[float] = None) -> pb.ExpandResponse:
        """The original messages behind a summary (or a source hash), one page at a time."""
        return self._call(self._stub.Expand, request, timeout)

    def recall(self, conversation: Sequence[object], arguments: Union[str, bytes, Mapping], *,
               max_tokens: int = DEFAULT_MAX_TOKENS, timeout: Optional[float] = None) -> str:
        """Answer the model's recall_context call (CompactResponse.recall_tool): ``arguments``
        is the call's input (JSON text or a dict: ``citation`` or ``query``), ``conversation``
        the messages the model saw. A citation returns the cited original messages' text; a
        query the compacted-away messages holding its words, best first, within
        ``max_tokens`` (a quarter of the answer's bytes). A wrong call raises RecallError
        (tell the model its message); an expired source CompactordError NOT_FOUND."""
        return Answerer(lambda r: self.expand(r, timeout=timeout), max_tokens).answer(conversation, arguments)

    def lift(self, body: Union[str, bytes, Mapping], provider_name: Union[str, int, None] = None, *,
             timeout: Optional[float] = None) -> pb.LiftResponse:
        """Read a provider request body (JSON text, bytes or a dict) into the IR; the format
        is detected unless named."""
        req = pb.LiftRequest(body=_json_text(body))
        if provider_name is not None:
            req.provider = provider(provider_name)
        return self._call(self._stub.Lift, req, timeout)

    def compact_body(
        self,
        body: Union[str, bytes, Mapping],
        *,
        to: Union[str, int, None] = None,
        policy: Optional[pb.Policy] = None,
        context_window: int = 0,
        force: bool = False,
        summarizer: str = "",
        instructions: str = "",
        model: str = "",
        base_body: Union[str, bytes, Mapping, None] = None,
        strict: bool = False,
        timeout: Optional[float] = None,
    ) -> str:
        """Lift a provider body, compact it, and lower it again (to the same provider, or to
        ``to``) in one call; returns the JSON body. When nothing needed compacting, the
        conversation comes back as it was. The body's tools are written in the target's form,
        and its other fields (model, temperature, …) are kept when the provider does not
        change; for another provider those with an equivalent there are carried (max tokens,
        temperature, top_p, stop sequences) and ``base_body`` gives the rest of the target's
        (an Anthropic body needs ``model`` and ``max_tokens``). ``strict`` fails
        (FAILED_PRECONDITION) rather than drop anything the target cannot carry, tools and
        other fields included."""
        target = None if to is None else provider(to)  # a bad name fails before any call
        lifted = self.lift(body, timeout=timeout)
        pol = pb.Policy()
        if policy is not None:
            pol.CopyFrom(policy)
        if context_window:
            pol.context_window = context_window
        res = self.compact(
            pb.CompactRequest(messages=lifted.messages, policy=pol, force=force,
                              summarizer=summarizer, instructions=instructions,
                              target_provider=target or 0),
            timeout=timeout,
        )
        messages = res.messages if res.compacted else lifted.messages
        if target is None:
            target = lifted.provider
        req = pb.LowerRequest(messages=messages, provider=target, model=model,
                              base_body="" if base_body is None else _json_text(base_body),
                              rest_body=lifted.rest_body, rest_provider=lifted.provider,
                              tools=lifted.tools, strict=strict)
        if lifted.HasField("tool_choice"):
            req.tool_choice.CopyFrom(lifted.tool_choice)
        out = self.lower(req, timeout=timeout)
        return out.body


def _json_text(body: Union[str, bytes, Mapping]) -> str:
    if isinstance(body, Mapping):
        return json.dumps(body)
    if isinstance(body, bytes):
        return body.decode("utf-8")
    return body
