"""Answering the model's recall_context calls (CompactResponse.recall_tool) through Expand.

The same contract as the Go package recalltool: a citation ("m12–m18", optionally after the
source hash it names) returns the cited original messages; a query returns the messages of
the sources the conversation names whose text holds the query's words, best first, bounded
in tokens (a quarter of the answer's bytes)."""

from __future__ import annotations

import json
import re
from typing import Callable, List, Mapping, Optional, Sequence, Tuple, Union

from ._gen.compactor.v1 import compactor_pb2 as pb
from ._gen.compactor.v1 import conversation_pb2 as ir

TOOL_NAME = "recall_context"
"""The name the model calls the tool by."""

DEFAULT_MAX_TOKENS = 4000
"""The most an answer takes unless told otherwise."""

_MAX_SOURCES = 32

_CITATION = re.compile(
    r"^\[?\s*(?:compactord\s+source\s+)?(?:([0-9a-fA-F]{64})[\s:/@#]*)?"
    r"\[?(m?\d{1,9}(?:\s*(?:–|—|-|\.\.)\s*m?\d{1,9})?)\]?\s*(?:[:,;].*)?\]?$",
    re.S,
)
_MARKER = re.compile(r"compactord source ([0-9a-f]{64}) (m\d{1,9}(?:[–-]m\d{1,9})?)")
_WORD = re.compile(r"[\w.\-/:]+")

# (message, source hash, index in the source)
Source = Tuple[ir.Message, str, int]


class RecallError(ValueError):
    """A recall_context call the model should be told is wrong; the message says why."""


def parse_citation(s: str) -> Tuple[str, str]:
    """The source hash ("" for the conversation's newest) and the range of a citation; the
    server parses the range (Expand's range), so every form a summary writes is read in one
    place."""
    m = _CITATION.match(s.strip())
    if not m:
        raise RecallError(f"{s[:80]!r} is not a citation (want m12, m12–m18, or a source hash and a range)")
    return (m.group(1) or "").lower(), m.group(2)


def parse_call(arguments: Union[str, bytes, Mapping]) -> Tuple[str, str]:
    """The citation and query of a call's input (JSON text or a dict)."""
    if not isinstance(arguments, Mapping):
        try:
            arguments = json.loads(arguments)
        except ValueError as e:
            raise RecallError(f"recall_context: the input is not a JSON object: {e}") from None
    if not isinstance(arguments, Mapping):
        raise RecallError("recall_context: the input is not a JSON object")
    citation, query = arguments.get("citation") or "", arguments.get("query") or ""
    if not isinstance(citation, str) or not isinstance(query, str):
        raise RecallError("recall_context: citation and query are strings")
    citation, query = citation.strip(), query.strip()
    if not citation and not query:
        raise RecallError("recall_context: give a citation or a query")
    return citation, query


def message_text(m: ir.Message) -> str:
    """m rendered for the model, as the Go package's Text: text parts as they are, a tool call
    as "[tool call <name>] <input JSON>", a tool result as "[tool result <name>] <output>",
    one part a line; parts with no text as "[<kind>]"."""
    lines = []
    for p in m.parts:
        kind = p.WhichOneof("content")
        if kind == "text":
            lines.append(p.text.text)
        elif kind == "tool_call":
            lines.append(f"[tool call {p.tool_call.tool_name}] {p.tool_call.input_json}")
        elif kind == "tool_result":
            lines.append(f"[tool result {p.tool_result.tool_name}] {_output_text(p.tool_result.output)}")
        elif kind == "image":
            lines.append("[image]")
        elif kind == "file":
            lines.append(f"[file {p.file.filename}]")
        elif kind == "reasoning":
            lines.append("[reasoning]")
        else:
            lines.append("[part]")
    return "\n".join(lines)


def _output_text(o: ir.ToolOutput) -> str:
    kind = o.WhichOneof("value")
    if kind in ("text", "json"):
        return getattr(o, kind)
    if kind in ("error_text", "error_json"):
        return "error: " + getattr(o, kind)
    if kind == "content":
        return "\n".join(p.text.text for p in o.content.parts if p.WhichOneof("content") == "text")
    if kind == "denied":
        return "denied: " + o.denied
    return ""


def _role(m: ir.Message) -> str:
    return ir.Role.Name(m.role).removeprefix("ROLE_").lower()


def _tokens(s: str) -> int:
    return (len(s.encode()) + 3) // 4


def _clip(s: str, n: int) -> str:
    b = s.encode()
    if len(b) <= n:
        return s
    return b[:n].decode(errors="ignore") + "…"


def _newest_source(conv: Sequence[ir.Message]) -> str:
    last = ""
    for m in reversed(conv):
        cs = _MARKER.findall(message_text(m))
        if not cs:
            continue
        if m.kind == ir.MESSAGE_KIND_COMPACT_SUMMARY:
            return cs[-1][0]
        last = last or cs[-1][0]
    return last


class Answerer:
    """Answers recall_context calls through ``expand`` (a Client's expand)."""

    def __init__(self, expand: Callable[[pb.ExpandRequest], pb.ExpandResponse], max_tokens: int = DEFAULT_MAX_TOKENS):
        self._expand = expand
        self.max_tokens = max_tokens or DEFAULT_MAX_TOKENS

    def answer(self, conversation: Sequence[ir.Message], arguments: Union[str, bytes, Mapping]) -> str:
        """The text answering a call with input ``arguments`` for ``conversation``, the one
        the model saw: each message under a line naming it ("[<hash> m12 user]")."""
        citation, query = parse_call(arguments)
        found = self.cited(conversation, citation) if citation else self.search(conversation, query)
        if not found:
            return f"No compacted-away message matches {json.dumps(query)}."
        return self._render(found, clip_first=not citation)

    def cited(self, conversation: Sequence[ir.Message], citation: str) -> List[Source]:
        """The original messages a citation names (one naming no source: of the newest
        source the conversation names)."""
        source, rng = parse_citation(citation)
        source = source or _newest_source(conversation)
        if not source:
            raise RecallError("recall_context: the conversation names no source; cite one by its hash")
        return self._read(source, rng)

    def search(self, conversation: Sequence[ir.Message], query: str) -> List[Source]:
        """The messages of the sources the conversation names (and those their messages
        name) holding query's words, best first: most words, the whole query, the newest."""
        terms = list(dict.fromkeys(w.strip(".-/:") for w in _WORD.findall(query.lower())))
        terms = [t for t in terms if t]
        if not terms:
            raise RecallError(f"recall_context: the query {query[:80]!r} has no words")
        phrase = query.strip().lower()
        queue = [(c, 0) for m in conversation for c in _MARKER.findall(message_text(m))]
        seen, have, hits = set(), set(), []
        while queue and len(seen) < _MAX_SOURCES:
            c, depth = queue.pop(0)
            if c in seen:
                continue
            seen.add(c)
            for msg, h, i in self._read(*c):
                if (h, i) in have:
                    continue
                have.add((h, i))
                text = message_text(msg)
                queue += [(n, depth + 1) for n in _MARKER.findall(text)]
                lower = text.lower()
                score = sum(2 for t in terms if t in lower)
                if not score:
                    continue
                if len(terms) > 1 and phrase in lower:
                    score += 1
                hits.append((-score, depth, -i, len(hits), (msg, h, i)))
        hits.sort()
        return [h[-1] for h in hits]

    def _read(self, source: str, rng: str) -> List[Source]:
        req = pb.ExpandRequest(source_hash=source, range=rng)
        out: List[Source] = []
        while True:
            page = self._expand(req)
            out += [(m, source, page.first_index + k) for k, m in enumerate(page.messages)]
            if not page.next_page_token:
                return out
            req.page_token = page.next_page_token

    def _render(self, found: Sequence[Source], clip_first: bool) -> str:
        budget, out = self.max_tokens, ""
        for k, (m, h, i) in enumerate(found):
            name = f"{h} m{i}"
            block = f"[{name} {_role(m)}]\n{message_text(m)}\n"
            if k == 0 and clip_first and _tokens(block) > budget:
                note = f"\n[cut to the answer's {budget} tokens: cite {name} for all of it]\n"
                block = _clip(block, max(0, 4 * budget - len(note.encode()))) + note
            if k > 0 and _tokens(out + block) > budget:
                out += f"[{len(found) - k} more not shown: over the answer's {budget} tokens; cite them one by one]\n"
                break
            out += block
        return out
