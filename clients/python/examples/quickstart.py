# Compacts a short agent conversation (conversation.openai.json, beside this file) through
# compactord and shows what happened. Run it from any folder while compactord serves.
import os, pathlib, sys
from compactord import Client, CompactordError, pb

addr = os.environ.get("COMPACTORD_ADDR", "localhost:50051")
body = (pathlib.Path(__file__).parent / "conversation.openai.json").read_text()
try:
    with Client(addr, tenant="acme", timeout=10) as c:
        lifted = c.lift(body)  # the OpenAI Chat body, as the provider-neutral IR
        # A window this small makes the 14 messages compact: old turns become a summary.
        res = c.compact(pb.CompactRequest(messages=lifted.messages,
                                          policy=pb.Policy(context_window=800, summary_max_tokens=300)))
        # The compacted conversation as an Anthropic body, with that provider's own fields.
        anthropic = c.lower(pb.LowerRequest(messages=res.messages, provider=pb.PROVIDER_ANTHROPIC_MESSAGES,
                                            base_body='{"model": "claude-sonnet-4-5", "max_tokens": 1024}'))
except CompactordError as e:  # one line, no traceback
    if e.code.name in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        sys.exit(f"quickstart: no compactord at {addr} ({e.code.name}): start it (compactord) or set COMPACTORD_ADDR")
    sys.exit(f"quickstart: {e}")

print(f"{res.plan.tokens_before} tokens before, at most {res.plan.tokens_after} after "
      f"({len(lifted.messages)} messages -> {len(res.messages)}); summary cache: "
      f"{pb.CacheStatus.Name(res.cache_status).removeprefix('CACHE_STATUS_')}")
print("summary, first lines:")
for line in [l for l in res.summary.text.splitlines() if l.strip()][:4]:
    print("  " + line[:100])
print(f"Anthropic body: {len(anthropic.body)} bytes")
