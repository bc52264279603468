# Plan, then compact an OpenAI Chat body into an Anthropic one, in-process (--local);
# without --local it calls the server at --addr (default localhost:50051).
body=internal/corpus/testdata/fixture-swe-units.openai.json
compactctl --local plan --context-window 2500 --summary-max-tokens 500 "$body"
# The input's tools go along in the target's form, and its other fields where the target
# has them; --base-body gives the rest of the target's (its model), --strict refuses to
# drop anything.
echo '{"model":"claude-sonnet-4-5","max_tokens":1024}' > anthropic.base.json
compactctl --local compact --context-window 2500 --summary-max-tokens 500 \
  --to anthropic --base-body anthropic.base.json --strict "$body" > compacted.anthropic.json
# Lift once, keep the IR (its tools too), lower it for any provider: Gemini's body
# declares the tools as functionDeclarations.
compactctl --local lift "$body" > conversation.ir.json
compactctl --local lower --to gemini conversation.ir.json > gemini.json
grep -o '"functionDeclarations":\[{"name":"[a-z_]*"' gemini.json
# Exit 3: invalid input; 4: cannot fit (the error states the smallest --context-window
# that fits); 5: transient, retry; 7: the server cannot be reached as configured
# (compactctl -h lists them all).
compactctl --local plan --context-window 300 "$body" || echo "exit $?"
