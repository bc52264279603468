// Compacts a short agent conversation (conversation.openai.json, beside this file) through
// compactord and shows what happened. Run it from any folder while compactord serves.
import { readFileSync } from "node:fs";
import { CacheStatus, CompactordError, Provider, createClient } from "@compactord/client";

const address = process.env.COMPACTORD_ADDR ?? "localhost:50051";
const body = readFileSync(new URL("conversation.openai.json", import.meta.url), "utf8");
const c = createClient({ address, tenant: "acme", timeoutMs: 10000 });
try {
  const lifted = await c.lift(body); // the OpenAI Chat body, as the provider-neutral IR
  // A window this small makes the 14 messages compact: old turns become a summary.
  const res = await c.compact({ messages: lifted.messages, policy: { contextWindow: 800n, summaryMaxTokens: 300n } });
  // The compacted conversation as an Anthropic body, with that provider's own fields.
  const anthropic = await c.lower({ messages: res.messages, provider: Provider.ANTHROPIC_MESSAGES,
    baseBody: JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 1024 }) });
  console.log(`${res.plan.tokensBefore} tokens before, at most ${res.plan.tokensAfter} after ` +
    `(${lifted.messages.length} messages -> ${res.messages.length}); summary cache: ${CacheStatus[res.cacheStatus]}`);
  console.log("summary, first lines:");
  for (const line of res.summary.text.split("\n").filter((l) => l.trim()).slice(0, 4)) console.log("  " + line.slice(0, 100));
  console.log(`Anthropic body: ${anthropic.body.length} bytes`);
} catch (e) {
  if (!(e instanceof CompactordError)) throw e;
  const down = ["UNAVAILABLE", "DEADLINE_EXCEEDED"].includes(e.codeName);
  console.error(down ? `quickstart: no compactord at ${address} (${e.codeName}): start it (compactord) or set COMPACTORD_ADDR`
    : `quickstart: ${e.message}`); // one line, no stack
  process.exitCode = 1;
} finally {
  c.close();
}
