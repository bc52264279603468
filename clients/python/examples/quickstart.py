import os, pathlib
from compactord import Client, CompactordError, pb

body = pathlib.Path("internal/corpus/testdata/fixture-swe-units.openai.json").read_text()
with Client(os.environ.get("COMPACTORD_ADDR", "localhost:50051"), tenant="acme") as c:
    # An OpenAI Chat body in, a compacted Anthropic body out, in one call.
    # Another provider's body needs its own other fields: base_body gives them.
    anthropic = c.compact_body(body, to="anthropic", context_window=2500,
                               policy=pb.Policy(summary_max_tokens=500),
                               base_body={"model": "claude-sonnet-4-5", "max_tokens": 1024})
    print(anthropic[:60])
    try:  # Errors carry the fields the server named.
        c.plan(pb.PlanRequest(messages=c.lift(body).messages))  # no context window
    except CompactordError as e:
        print(e.code.name, e.field_violations)
