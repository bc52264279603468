// The client against the real compactord binary: lift, plan, compact (miss, then hit), lower
// to Anthropic and Gemini, and errors read through the client's own types.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  Action,
  CacheStatus,
  CompactordError,
  Provider,
  Role,
  createClient,
} from "../src/index.js";
import { ROOT, fixture, startServer } from "./server.js";

const policy = { contextWindow: 2500n, summaryMaxTokens: 500n };
let server;
let client;
const body = fixture("fixture-swe-units.openai.json");

before(async () => {
  server = await startServer();
  client = createClient({ address: server.address, tenant: "node-story" });
});
after(async () => {
  client?.close();
  await server?.stop();
});

test("the story: lift, plan, compact (miss then hit), lower", async () => {
  const lifted = await client.lift(body);
  assert.equal(lifted.provider, Provider.OPENAI_CHAT);
  assert.equal(JSON.parse(lifted.restBody).model, "gpt-4o");
  assert.equal(lifted.messages[0].role, Role.SYSTEM);

  const plan = await client.plan({ messages: lifted.messages, policy });
  assert.equal(plan.action, Action.SUMMARIZE);
  assert.ok(plan.cutIndex > 0 && plan.cutIndex < lifted.messages.length);

  const req = { messages: lifted.messages, policy };
  const miss = await client.compact(req);
  assert.ok(miss.compacted);
  assert.equal(miss.cacheStatus, CacheStatus.MISS);
  assert.ok(miss.summary.requestsTotal >= 1);
  const hit = await client.compact(req);
  assert.equal(hit.cacheStatus, CacheStatus.HIT);
  assert.equal(hit.summary.text, miss.summary.text);

  const anthropic = JSON.parse((await client.lower({ messages: hit.messages, provider: Provider.ANTHROPIC_MESSAGES })).body);
  assert.match(anthropic.system, /^You are an autonomous software engineer/);
  assert.match(JSON.stringify(anthropic.messages[0]), /<summary>/);
  const gemini = JSON.parse((await client.lower({ messages: hit.messages, provider: Provider.GEMINI })).body);
  assert.equal(gemini.contents[0].role, "user");
  assert.ok(gemini.systemInstruction);
});

test("compactBody keeps the rest of the body, or the conversation when nothing is due", async () => {
  const out = JSON.parse(await client.compactBody(body, { policy }));
  assert.equal(out.model, "gpt-4o");
  assert.ok(out.tools.length > 0);
  assert.ok(out.messages.length < JSON.parse(body).messages.length);
  const same = JSON.parse(await client.compactBody(body, { contextWindow: 128000 }));
  assert.equal(same.messages.length, JSON.parse(body).messages.length);
  const gemini = JSON.parse(await client.compactBody(body, { to: "gemini", policy }));
  assert.ok(gemini.contents && !gemini.model);
  // The input's tools, as Gemini's function declarations (issue 36).
  assert.deepEqual(gemini.tools.flatMap((t) => (t.functionDeclarations ?? []).map((d) => d.name)), ["bash", "str_replace_editor", "submit"]);
  await assert.rejects(client.compactBody(body, { to: "claude", policy }), TypeError);
});

test("compactBody to another provider takes its baseBody; strict names what is missing", async () => {
  const out = JSON.parse(await client.compactBody(body, { to: "anthropic", policy, strict: true, baseBody: { model: "claude-sonnet-4-5", max_tokens: 1024 } }));
  assert.equal(out.model, "claude-sonnet-4-5");
  assert.equal(out.max_tokens, 1024);
  // The input's tools, in Anthropic's form (issue 36: strict used to let them go).
  assert.deepEqual(out.tools.map((t) => t.name), ["bash", "str_replace_editor", "submit"]);
  assert.deepEqual(out.tools[0].input_schema.required, ["command"]);
  await assert.rejects(client.compactBody(body, { to: "anthropic", policy, strict: true }), (err) => {
    assert.equal(err.codeName, "FAILED_PRECONDITION");
    assert.match(err.message, /max_tokens/);
    return true;
  });
  // A field of the input the target has no place for fails strict, named.
  const seeded = { ...JSON.parse(body), seed: 7 };
  await assert.rejects(client.compactBody(seeded, { to: "gemini", policy, strict: true }), (err) => {
    assert.equal(err.codeName, "FAILED_PRECONDITION");
    assert.match(err.message, /rest_body\.seed/);
    return true;
  });
});

test("INVALID_ARGUMENT names the field in BadRequest", async () => {
  const lifted = await client.lift(body);
  const messages = [...lifted.messages, { role: Role.ASSISTANT }]; // a message needs a part
  await assert.rejects(client.plan({ messages, policy }), (err) => {
    assert.ok(err instanceof CompactordError);
    assert.equal(err.codeName, "INVALID_ARGUMENT");
    assert.deepEqual(err.fieldViolations.map((v) => v.field), [`messages[${lifted.messages.length}].parts`]);
    assert.equal(err.retryable, false);
    return true;
  });
  await assert.rejects(client.lift('{"prompt": "not a chat body"}'), (err) => {
    assert.equal(err.codeName, "INVALID_ARGUMENT");
    assert.deepEqual(err.fieldViolations.map((v) => v.field), ["body"]);
    return true;
  });
});

// closedPort is a loopback port where nothing listens.
function closedPort() {
  return new Promise((ok) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => ok(p));
    });
  });
}

test("an unreachable server is UNAVAILABLE", async () => {
  const port = await closedPort();
  const c = createClient({ address: `127.0.0.1:${port}`, timeoutMs: 2000, retries: false });
  await assert.rejects(c.lift("{}"), (err) => ["UNAVAILABLE", "DEADLINE_EXCEEDED"].includes(err.codeName));
  c.close();
});

const example = join(ROOT, "clients/node/examples/quickstart.mjs");

// execExample runs the README's Node example with node, in cwd, against address; it resolves
// with the exit code and both outputs, whatever the exit code.
function execExample(node, address, cwd) {
  return new Promise((resolve) => {
    execFile(node, [example], { cwd, env: { ...process.env, COMPACTORD_ADDR: address } }, (err, stdout, stderr) =>
      resolve({ code: err ? err.code : 0, stdout, stderr }));
  });
}

// runExample checks that the example shows a compaction happening: tokens before and after,
// the summary's first lines and the cache status, from the repository root and from another
// folder (its conversation is found beside it, not in the working directory).
async function runExample(node) {
  for (const cwd of [ROOT, tmpdir()]) {
    const { code, stdout, stderr } = await execExample(node, server.address, cwd);
    assert.equal(code, 0, stderr);
    const lines = stdout.trim().split("\n");
    const m = lines[0].match(/^(\d+) tokens before, at most (\d+) after \(14 messages -> \d+\); summary cache: (MISS|HIT)$/);
    assert.ok(m, stdout);
    assert.ok(Number(m[2]) < Number(m[1]), stdout);
    assert.equal(lines[1], "summary, first lines:");
    assert.equal(lines[2], "  ## Where it stopped");
    assert.match(lines[3], /^ {2}- last intent: /);
    assert.match(lines[lines.length - 1], /^Anthropic body: \d+ bytes$/);
  }
}

test("the README example (examples/quickstart.mjs) shows a compaction, from any folder", () => runExample(process.execPath));

test("the README example, with no server, prints one line and exits non-zero", async () => {
  const address = `127.0.0.1:${await closedPort()}`;
  const { code, stdout, stderr } = await execExample(process.execPath, address, tmpdir());
  assert.notEqual(code, 0);
  assert.equal(stdout, "");
  assert.equal(stderr.split("\n").filter(Boolean).length, 1, stderr);
  assert.ok(stderr.startsWith(`quickstart: no compactord at ${address} (UNAVAILABLE): `), stderr);
  assert.match(stderr, /COMPACTORD_ADDR/);
});

// package.json's engines is the oldest Node the client and its example run on, checked here
// with that very version: COMPACTORD_NODE_OLDEST names its node binary (.ci/run installs it
// with npm). Without it the check is skipped, loudly, unless CLIENTS_REQUIRED is set.
const oldest = process.env.COMPACTORD_NODE_OLDEST;
test(
  "the README example runs on the oldest Node that engines admits",
  { skip: !oldest && !process.env.CLIENTS_REQUIRED && "COMPACTORD_NODE_OLDEST unset: the oldest supported Node is not checked" },
  async () => {
    assert.ok(oldest, "COMPACTORD_NODE_OLDEST must name the oldest supported node binary (CLIENTS_REQUIRED is set)");
    const engines = JSON.parse(readFileSync(join(ROOT, "clients/node/package.json"), "utf8")).engines.node;
    const { stdout } = await promisify(execFile)(oldest, ["--version"]);
    assert.equal(`>=${stdout.trim().replace(/^v/, "")}`, engines, "COMPACTORD_NODE_OLDEST is not the version engines names");
    await runExample(oldest);
  },
);
