// The client's own behaviour against a scripted in-process server: retries on UNAVAILABLE
// through the service config, none on other codes, metadata on every call, deadlines.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import { CompactorServiceDefinition, LiftResponseSchema, createClient } from "../src/index.js";

async function scripted({ codes = [], delayMs = 0 } = {}) {
  const calls = [];
  const server = new grpc.Server();
  server.addService(CompactorServiceDefinition, {
    lift(call, callback) {
      calls.push(call.metadata.getMap());
      const code = codes.shift();
      setTimeout(() => {
        if (code !== undefined) callback({ code, details: "scripted" });
        else callback(null, create(LiftResponseSchema, { restBody: "{}" }));
      }, delayMs);
    },
  });
  const port = await new Promise((ok, fail) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? fail(err) : ok(p))),
  );
  return { calls, address: `127.0.0.1:${port}`, stop: () => server.forceShutdown() };
}

test("UNAVAILABLE is retried", async () => {
  const s = await scripted({ codes: [grpc.status.UNAVAILABLE, grpc.status.UNAVAILABLE] });
  const c = createClient({ address: s.address });
  await c.lift("{}");
  assert.equal(s.calls.length, 3);
  c.close();
  s.stop();
});

test("no retry when disabled, or for a code that is not transient; four attempts at most", async () => {
  let s = await scripted({ codes: [grpc.status.UNAVAILABLE] });
  let c = createClient({ address: s.address, retries: false });
  await assert.rejects(c.lift("{}"), (e) => e.codeName === "UNAVAILABLE");
  assert.equal(s.calls.length, 1);
  c.close();
  s.stop();
  s = await scripted({ codes: [grpc.status.INVALID_ARGUMENT] });
  c = createClient({ address: s.address });
  await assert.rejects(c.lift("{}"), (e) => e.codeName === "INVALID_ARGUMENT");
  assert.equal(s.calls.length, 1);
  c.close();
  s.stop();
  s = await scripted({ codes: Array(10).fill(grpc.status.UNAVAILABLE) });
  c = createClient({ address: s.address });
  await assert.rejects(c.lift("{}"));
  assert.equal(s.calls.length, 4);
  c.close();
  s.stop();
});

test("tenant and credentials on every call", async () => {
  const s = await scripted();
  const c = createClient({ address: s.address, tenant: "acme", token: "tok", apiKey: "key" });
  await c.lift("{}");
  assert.equal(s.calls[0]["x-compactor-tenant"], "acme");
  assert.equal(s.calls[0].authorization, "Bearer tok");
  assert.equal(s.calls[0]["x-api-key"], "key");
  c.close();
  s.stop();
});

test("the deadline", async () => {
  const s = await scripted({ delayMs: 2000 });
  const c = createClient({ address: s.address, timeoutMs: 200 });
  await assert.rejects(c.lift("{}"), (e) => e.codeName === "DEADLINE_EXCEEDED");
  c.close();
  s.stop();
});
