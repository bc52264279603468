# Plan, then compact an OpenAI Chat body into an Anthropic one, in-process (--local);
# without --local it calls the server at --addr (default localhost:50051).
body=internal/corpus/testdata/fixture-swe-units.openai.json
compactctl --local plan --context-window 2500 --summary-max-tokens 500 "$body"
# Another provider's body needs that provider's other fields: --base-body gives them,
# --strict refuses to drop anything.
echo '{"model":"claude-sonnet-4-5","max_tokens":1024}' > anthropic.base.json
compactctl --local compact --context-window 2500 --summary-max-tokens 500 \
  --to anthropic --base-body anthropic.base.json --strict "$body" > compacted.anthropic.json
# Lift once, keep the IR, lower it for any provider.
compactctl --local lift "$body" > conversation.ir.json
compactctl --local lower --to gemini conversation.ir.json > gemini.json
# Exit 3: invalid input; 4: cannot fit (the error states the smallest --context-window
# that fits); 5: transient, retry; 7: the server cannot be reached as configured
# (compactctl -h lists them all).
compactctl --local plan --context-window 300 "$body" || echo "exit $?"
