// The recall_context helper against the real compactord binary: the model calls the tool
// (Compact offers it, Lower writes it into the body) with a citation from the summary, and
// the answer, read through Expand, is the cited originals' text byte for byte; a query
// answers with the matching originals, within its token budget.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { MessageKind, Provider, RECALL_TOOL_NAME, RecallError, Role, createClient, messageText } from "../src/index.js";
import { fixture, startServer } from "./server.js";

const policy = { contextWindow: 2500n, summaryMaxTokens: 500n };
const MARKER = /\[compactord source ([0-9a-f]{64}) m(\d+)[–-]m(\d+)/;
let server;
let client;
const body = fixture("fixture-swe-units.openai.json");

before(async () => {
  server = await startServer();
  client = createClient({ address: server.address, tenant: "node-recall" });
});
after(async () => {
  client?.close();
  await server?.stop();
});

async function compacted() {
  const lifted = await client.lift(body);
  const res = await client.compact({ messages: lifted.messages, policy, targetProvider: Provider.OPENAI_CHAT });
  assert.ok(res.compacted && res.sourceHash);
  return { original: lifted.messages, res };
}

test("a citation returns the cited originals", async () => {
  const { original, res } = await compacted();
  assert.equal(res.recallTool.name, RECALL_TOOL_NAME);
  const lowered = JSON.parse((await client.lower({ messages: res.messages, provider: Provider.OPENAI_CHAT, recallTool: true })).body);
  assert.deepEqual(lowered.tools.at(-1), JSON.parse(res.recallToolJson));

  const summary = res.messages.find((m) => m.kind === MessageKind.COMPACT_SUMMARY);
  const [, h, first, last] = MARKER.exec(messageText(summary));
  assert.equal(h, res.sourceHash);
  const lo = Number(first) + 1;
  const hi = Math.min(Number(first) + 3, Number(last));
  // The scripted model's turn, read back from the body as the host would.
  lowered.messages.push({ role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function",
    function: { name: RECALL_TOOL_NAME, arguments: JSON.stringify({ citation: `m${lo}-m${hi}` }) } }] });
  const turn = (await client.lift(lowered, "openai-chat")).messages;
  const call = turn.at(-1).parts.map((p) => p.content).find((c) => c.case === "toolCall" && c.value.toolName === RECALL_TOOL_NAME).value;

  const answer = await client.recall(turn.slice(0, -1), call.inputJson, { maxTokens: 1 << 20 });
  let want = "";
  for (let i = lo; i <= hi; i++) want += `[${h} m${i} ${Role[original[i].role].toLowerCase()}]\n${messageText(original[i])}\n`;
  assert.equal(answer, want);
  assert.equal(await client.recall(res.messages, { citation: `${h} m${lo}–m${hi}` }, { maxTokens: 1 << 20 }), want);
});

test("a query is ranked and bounded", async () => {
  const { res } = await compacted();
  const answer = await client.recall(res.messages, { query: "parse_quantity" }, { maxTokens: 300 });
  assert.ok(Math.ceil(Buffer.byteLength(answer) / 4) <= 300 + 30, answer);
  const first = answer.split(/\n(?=\[[0-9a-f]{64} m\d+ )/)[0];
  assert.match(first.toLowerCase(), /parse_quantity/);
  assert.match(await client.recall(res.messages, { query: "zzz-never-said" }), /^No compacted-away message matches/);
  await assert.rejects(client.recall(res.messages, { citation: "the deploy step" }), RecallError);
  await assert.rejects(client.recall(res.messages, "{}"), RecallError);
});
