// @compactord/client: a typed Node.js client for compactord (compactor.v1.CompactorService),
// over @grpc/grpc-js with the messages protoc-gen-es generates in ../gen.
import * as grpc from "@grpc/grpc-js";
import { create, createRegistry, fromBinary, toBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import {
  CompactRequestSchema,
  CompactorService,
  ExpandRequestSchema,
  LiftRequestSchema,
  LowerRequestSchema,
  PlanRequestSchema,
  PolicySchema,
  Provider,
} from "../gen/compactor/v1/compactor_pb.js";
import { StatusSchema } from "../gen/google/rpc/status_pb.js";
import {
  BadRequestSchema,
  ErrorInfoSchema,
  QuotaFailureSchema,
  RetryInfoSchema,
} from "../gen/google/rpc/error_details_pb.js";

import { DEFAULT_RECALL_MAX_TOKENS, createRecall } from "./recall.js";

export * from "../gen/compactor/v1/compactor_pb.js";
export * from "../gen/compactor/v1/conversation_pb.js";
export { create, toJson, fromJson } from "@bufbuild/protobuf";
export { RECALL_TOOL_NAME, DEFAULT_RECALL_MAX_TOKENS, RecallError, createRecall, messageText, parseCitation } from "./recall.js";

/** Provider names accepted wherever a provider is expected, as in compactctl's --to. */
export const PROVIDERS = Object.freeze({
  anthropic: Provider.ANTHROPIC_MESSAGES,
  "openai-chat": Provider.OPENAI_CHAT,
  "openai-responses": Provider.OPENAI_RESPONSES,
  gemini: Provider.GEMINI,
  bedrock: Provider.BEDROCK_CONVERSE,
});

// Retries UNAVAILABLE (transient: a replica draining or overloaded, a summarizer outage)
// with exponential backoff, through gRPC's own retry machinery.
const SERVICE_CONFIG = JSON.stringify({
  methodConfig: [
    {
      name: [{ service: CompactorService.typeName }],
      retryPolicy: {
        maxAttempts: 4,
        initialBackoff: "0.2s",
        maxBackoff: "3s",
        backoffMultiplier: 2,
        retryableStatusCodes: ["UNAVAILABLE"],
      },
    },
  ],
});

const MAX_MESSAGE_BYTES = 64 << 20;

const detailTypes = createRegistry(BadRequestSchema, QuotaFailureSchema, RetryInfoSchema, ErrorInfoSchema);

/**
 * A failed call. `code` is the gRPC status code (grpc.status), `codeName` its name; the
 * google.rpc details compactord attaches are decoded: `fieldViolations` (BadRequest),
 * `quotaViolations` (QuotaFailure), `retryDelayMs` (RetryInfo; null: a retry will not help),
 * `reason` and `metadata` (ErrorInfo).
 */
export class CompactordError extends Error {
  constructor(code, message, details = []) {
    super(`${grpc.status[code]}: ${message}`);
    this.name = "CompactordError";
    this.code = code;
    this.codeName = grpc.status[code];
    this.details = message;
    this.fieldViolations = [];
    this.quotaViolations = [];
    this.retryDelayMs = null;
    this.reason = "";
    this.metadata = {};
    for (const d of details) {
      switch (d.$typeName) {
        case BadRequestSchema.typeName:
          this.fieldViolations.push(...d.fieldViolations.map((v) => ({ field: v.field, description: v.description })));
          break;
        case QuotaFailureSchema.typeName:
          this.quotaViolations.push(...d.violations.map((v) => ({ subject: v.subject, description: v.description })));
          break;
        case RetryInfoSchema.typeName:
          this.retryDelayMs = Number(d.retryDelay?.seconds ?? 0n) * 1000 + (d.retryDelay?.nanos ?? 0) / 1e6;
          break;
        case ErrorInfoSchema.typeName:
          this.reason = d.reason;
          this.metadata = { ...d.metadata };
          break;
      }
    }
  }

  /** Whether the server says a retry may succeed (it sent RetryInfo). */
  get retryable() {
    return this.retryDelayMs !== null;
  }

  /** Reads a grpc-js ServiceError, its google.rpc.Status details included. */
  static fromServiceError(err) {
    const details = [];
    for (const bin of err.metadata?.get("grpc-status-details-bin") ?? []) {
      const st = fromBinary(StatusSchema, bin);
      for (const any of st.details) {
        const m = anyUnpack(any, detailTypes);
        if (m) details.push(m);
      }
    }
    return new CompactordError(err.code ?? grpc.status.UNKNOWN, err.details ?? err.message, details);
  }
}

/** The Provider value of a name ("anthropic", "openai-chat", …) or of a value. */
export function provider(p) {
  if (typeof p === "number") return p;
  const v = PROVIDERS[p];
  if (v === undefined) {
    throw new TypeError(`unknown provider ${JSON.stringify(p)}; want one of ${Object.keys(PROVIDERS).join(", ")}`);
  }
  return v;
}

function serviceDefinition(service) {
  const def = {};
  for (const m of service.methods) {
    def[m.localName] = {
      path: `/${service.typeName}/${m.name}`,
      requestStream: false,
      responseStream: false,
      requestSerialize: (msg) => Buffer.from(toBinary(m.input, msg)),
      requestDeserialize: (b) => fromBinary(m.input, b),
      responseSerialize: (msg) => Buffer.from(toBinary(m.output, msg)),
      responseDeserialize: (b) => fromBinary(m.output, b),
    };
  }
  return def;
}

/** The grpc-js service definition of CompactorService (for servers, e.g. test doubles). */
export const CompactorServiceDefinition = serviceDefinition(CompactorService);

const ServiceClient = grpc.makeGenericClientConstructor(CompactorServiceDefinition, "CompactorService");

function credentials(tls) {
  if (!tls) return grpc.credentials.createInsecure();
  if (tls === true) return grpc.credentials.createSsl();
  return grpc.credentials.createSsl(tls.ca ?? null, tls.key ?? null, tls.cert ?? null);
}

function jsonText(body) {
  if (typeof body === "string") return body;
  if (body instanceof Uint8Array) return Buffer.from(body).toString("utf8");
  return JSON.stringify(body);
}

/**
 * Connects to compactord. Options: `address` (host:port), `tenant` (x-compactor-tenant),
 * `token` (a JWT, sent as authorization: Bearer), `apiKey` (x-api-key), `tls` (true for the
 * system roots, or {ca, cert, key} PEM buffers; cert and key for mutual TLS), `timeoutMs`
 * (each call's deadline, default 60 s), `retries` (default true: UNAVAILABLE is retried by
 * the service config).
 */
export function createClient({ address, tenant, token, apiKey, tls, timeoutMs = 60_000, retries = true, channelOptions = {} }) {
  const options = {
    "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
    "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
    "grpc.enable_retries": retries ? 1 : 0,
    ...(retries ? { "grpc.service_config": SERVICE_CONFIG } : {}),
    ...channelOptions,
  };
  const client = new ServiceClient(address, credentials(tls), options);
  const md = new grpc.Metadata();
  if (tenant) md.set("x-compactor-tenant", tenant);
  if (token) md.set("authorization", `Bearer ${token}`);
  if (apiKey) md.set("x-api-key", apiKey);

  const call = (method, schema, req, opts = {}) =>
    new Promise((resolve, reject) => {
      const deadline = new Date(Date.now() + (opts.timeoutMs ?? timeoutMs));
      client[method](create(schema, req), md, { deadline }, (err, res) =>
        err ? reject(CompactordError.fromServiceError(err)) : resolve(res),
      );
    });

  const api = {
    /** What compaction a conversation needs under a policy, and why; calls no model. */
    plan: (req, opts) => call("plan", PlanRequestSchema, req, opts),
    /** Compacts a conversation: prunes old tool outputs, summarizes old turns (cached). */
    compact: (req, opts) => call("compact", CompactRequestSchema, req, opts),
    /** Renders a conversation as a provider's request body. */
    lower: (req, opts) => call("lower", LowerRequestSchema, req, opts),
    /** The original messages behind a summary (or a source hash), one page at a time. */
    expand: (req, opts) => call("expand", ExpandRequestSchema, req, opts),
    /**
     * Answers the model's recall_context call (CompactResponse.recallTool): `args` is the
     * call's input (JSON text or an object: citation or query), `conversation` the messages
     * the model saw. A citation resolves to the cited original messages' text; a query to the
     * compacted-away messages holding its words, best first, within `maxTokens` (a quarter
     * of the answer's bytes). A wrong call rejects with RecallError (tell the model its
     * message); an expired source with CompactordError NOT_FOUND.
     */
    recall: (conversation, args, { maxTokens = DEFAULT_RECALL_MAX_TOKENS, timeoutMs: t } = {}) =>
      createRecall((req) => api.expand(req, { timeoutMs: t }), maxTokens).answer(conversation, args),
    /** Reads a provider body (JSON text, bytes or an object) into the IR; detected unless named. */
    lift: (body, providerName, opts) =>
      call("lift", LiftRequestSchema, { body: jsonText(body), provider: providerName === undefined ? 0 : provider(providerName) }, opts),
    /**
     * Lifts a provider body, compacts it and lowers it again (to the same provider, or to
     * `to`) in one call; resolves to the JSON body. When nothing needed compacting the
     * conversation comes back as it was. The body's tools are written in the target's form;
     * its other fields (model, temperature, …) are kept when the provider does not change,
     * and for another provider those with an equivalent there are carried and `baseBody`
     * gives the rest.
     */
    async compactBody(body, { to, policy, contextWindow, force = false, summarizer = "", instructions = "", model = "", baseBody, strict = false, timeoutMs: t } = {}) {
      const target = to === undefined ? undefined : provider(to); // a bad name fails before any call
      const opts = { timeoutMs: t };
      const lifted = await api.lift(body, undefined, opts);
      const pol = create(PolicySchema, policy ?? {});
      if (contextWindow) pol.contextWindow = BigInt(contextWindow);
      const res = await api.compact({ messages: lifted.messages, policy: pol, force, summarizer, instructions, targetProvider: target ?? 0 }, opts);
      const messages = res.compacted ? res.messages : lifted.messages;
      const prov = target ?? lifted.provider;
      const base = baseBody === undefined ? "" : typeof baseBody === "string" ? baseBody : JSON.stringify(baseBody);
      const out = await api.lower({ messages, provider: prov, model, baseBody: base, strict, restBody: lifted.restBody,
        restProvider: lifted.provider, tools: lifted.tools, toolChoice: lifted.toolChoice }, opts);
      return out.body;
    },
    /** Closes the connection. */
    close: () => client.close(),
  };
  return api;
}
