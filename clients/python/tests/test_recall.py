"""The recall_context helper against the real compactord binary: the model calls the tool
(Compact offers it, Lower writes it into the body) with a citation from the summary, and the
answer, read through Expand, is the cited originals' text byte for byte; a query answers
with the matching originals, within its token budget."""

import json
import re

import pytest

from compactord import RECALL_TOOL_NAME, Client, RecallError, ir, message_text, pb

POLICY = pb.Policy(context_window=2500, summary_max_tokens=500)
MARKER = re.compile(r"\[compactord source ([0-9a-f]{64}) m(\d+)[–-]m(\d+)")


def compacted(c, swe_body):
    lifted = c.lift(swe_body)
    res = c.compact(pb.CompactRequest(messages=lifted.messages, policy=POLICY,
                                      target_provider=pb.PROVIDER_ANTHROPIC_MESSAGES))
    assert res.compacted and res.source_hash
    return lifted.messages, res


def test_recall_citation_returns_the_originals(server, swe_body):
    with Client(server, tenant="py-recall") as c:
        original, res = compacted(c, swe_body)
        assert res.recall_tool.name == RECALL_TOOL_NAME
        assert json.loads(res.recall_tool_json)["name"] == RECALL_TOOL_NAME
        body = json.loads(c.lower(pb.LowerRequest(messages=res.messages, provider=pb.PROVIDER_ANTHROPIC_MESSAGES,
                                                  base_body='{"model":"m","max_tokens":100}', recall_tool=True)).body)
        assert json.loads(res.recall_tool_json) in body["tools"]

        summary = next(m for m in res.messages if m.kind == ir.MESSAGE_KIND_COMPACT_SUMMARY)
        h, first, last = MARKER.search(message_text(summary)).groups()
        assert h == res.source_hash
        lo, hi = int(first) + 1, min(int(first) + 3, int(last))
        # The scripted model's turn, read back from the body as the host would.
        body["messages"].append({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": RECALL_TOOL_NAME, "input": {"citation": f"m{lo}–m{hi}"}}]})
        turn = c.lift(body, "anthropic").messages
        call = next(p.tool_call for p in turn[-1].parts if p.tool_call.tool_name == RECALL_TOOL_NAME)

        answer = c.recall(turn[:-1], call.input_json, max_tokens=1 << 20)
        want = "".join(f"[{h} m{i} {ir.Role.Name(original[i].role)[5:].lower()}]\n{message_text(original[i])}\n"
                       for i in range(lo, hi + 1))
        assert answer == want
        # The same with the source named, as a cut output's note writes it.
        assert c.recall(res.messages, {"citation": f"compactord source {h} m{lo}-{hi}"}, max_tokens=1 << 20) == want


def test_recall_query_is_ranked_and_bounded(server, swe_body):
    with Client(server, tenant="py-recall") as c:
        original, res = compacted(c, swe_body)
        answer = c.recall(res.messages, {"query": "parse_quantity"}, max_tokens=300)
        assert (len(answer.encode()) + 3) // 4 <= 300 + 30
        first = re.split(r"\n(?=\[[0-9a-f]{64} m\d+ )", answer)[0]
        assert "parse_quantity" in first.lower()
        assert c.recall(res.messages, {"query": "zzz-never-said"}).startswith("No compacted-away message matches")
        with pytest.raises(RecallError):
            c.recall(res.messages, {"citation": "the deploy step"})
        with pytest.raises(RecallError):
            c.recall(res.messages, "{}")
