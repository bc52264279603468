import { readFileSync } from "node:fs";
import { createClient, CompactordError } from "@compactord/client";

const body = readFileSync("internal/corpus/testdata/fixture-swe-units.openai.json", "utf8");
const c = createClient({ address: process.env.COMPACTORD_ADDR ?? "localhost:50051", tenant: "acme" });
// An OpenAI Chat body in, a compacted Anthropic body out, in one call.
const anthropic = await c.compactBody(body, { to: "anthropic", contextWindow: 2500, policy: { summaryMaxTokens: 500n },
  baseBody: { model: "claude-sonnet-4-5", max_tokens: 1024 } }); // the target's other fields
console.log(anthropic.slice(0, 60));
try { await c.plan({ messages: (await c.lift(body)).messages }); } // no context window
catch (e) { if (e instanceof CompactordError) console.log(e.codeName, e.fieldViolations[0].field); }
c.close();
