import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ChannelOptions } from "@grpc/grpc-js";
import type {
  CompactRequestSchema,
  CompactResponse,
  ExpandRequestSchema,
  ExpandResponse,
  LiftResponse,
  LowerRequestSchema,
  LowerResponse,
  PlanRequestSchema,
  PlanResponse,
  PolicySchema,
  Provider,
} from "../gen/compactor/v1/compactor_pb.js";
import type { Message } from "../gen/compactor/v1/conversation_pb.js";

export * from "../gen/compactor/v1/compactor_pb.js";
export * from "../gen/compactor/v1/conversation_pb.js";
export { create, toJson, fromJson } from "@bufbuild/protobuf";

/** Provider names accepted wherever a provider is expected, as in compactctl's --to. */
export declare const PROVIDERS: Readonly<Record<ProviderName, Provider>>;
export type ProviderName = "anthropic" | "openai-chat" | "openai-responses" | "gemini" | "bedrock";

/** The Provider value of a name or of a value; throws TypeError for an unknown name. */
export declare function provider(p: ProviderName | Provider): Provider;

/** A failed call, with the google.rpc details compactord attaches decoded. */
export declare class CompactordError extends Error {
  /** The gRPC status code (see @grpc/grpc-js `status`). */
  readonly code: number;
  /** Its name: "INVALID_ARGUMENT", "UNAVAILABLE", … */
  readonly codeName: string;
  /** The server's message. */
  readonly details: string;
  /** BadRequest: each invalid field, e.g. "messages[3].parts". */
  readonly fieldViolations: { field: string; description: string }[];
  /** QuotaFailure: the per-tenant limit that was hit. */
  readonly quotaViolations: { subject: string; description: string }[];
  /** RetryInfo: when a retry may succeed; null when retrying will not help. */
  readonly retryDelayMs: number | null;
  /** ErrorInfo. */
  readonly reason: string;
  readonly metadata: Record<string, string>;
  /** Whether the server says a retry may succeed. */
  readonly retryable: boolean;
}

export interface ClientOptions {
  /** host:port. */
  address: string;
  /** x-compactor-tenant: with authentication, it may only repeat the identity's tenant. */
  tenant?: string;
  /** A JWT, sent as `authorization: Bearer <token>`. */
  token?: string;
  /** Sent as `x-api-key`. */
  apiKey?: string;
  /** true: TLS with the system roots; or PEM buffers (cert and key for mutual TLS). */
  tls?: true | { ca?: Buffer; cert?: Buffer; key?: Buffer };
  /** Each call's deadline; default 60 000. */
  timeoutMs?: number;
  /** Retry UNAVAILABLE through the gRPC service config; default true. */
  retries?: boolean;
  channelOptions?: ChannelOptions;
}

export interface CallOptions {
  timeoutMs?: number;
}

export interface CompactBodyOptions extends CallOptions {
  /** The output's provider; default the input's. */
  to?: ProviderName | Provider;
  policy?: MessageInitShape<typeof PolicySchema>;
  contextWindow?: number | bigint;
  force?: boolean;
  summarizer?: string;
  instructions?: string;
  /** The model the lowered body is for. */
  model?: string;
  /** The target's other fields (model, max_tokens, ...) as JSON text or an object; they win
   * over the input's, which are carried where the target has an equivalent (all of them when
   * the provider does not change). An Anthropic body needs model and max_tokens. The input's
   * tools are written in the target's form either way. */
  baseBody?: string | object;
  /** Fail (FAILED_PRECONDITION) rather than drop anything the target cannot carry, tools
   * and other fields included. */
  strict?: boolean;
}

/** The name the model calls the recall_context tool by. */
export declare const RECALL_TOOL_NAME: "recall_context";
/** The most a recall answer takes unless told otherwise (tokens: a quarter of its bytes). */
export declare const DEFAULT_RECALL_MAX_TOKENS: number;

/** A recall_context call the model should be told is wrong; the message says why. */
export declare class RecallError extends Error {}

/** The input of a recall_context call: a citation or a query. */
export interface RecallArguments {
  citation?: string;
  query?: string;
}

/** One original message an answer quotes: where it is and the message, as Compact received it. */
export interface RecalledMessage {
  message: Message;
  hash: string;
  index: number;
}

export interface Recall {
  /** The original messages a citation names (naming no source: the conversation's newest). */
  cited(conversation: Message[], citation: string): Promise<RecalledMessage[]>;
  /** The messages of the sources the conversation names holding the query's words, best first. */
  search(conversation: Message[], query: string): Promise<RecalledMessage[]>;
  /** The text answering a call, each message under a line naming it ("[<hash> m12 user]"). */
  answer(conversation: Message[], args: string | RecallArguments): Promise<string>;
}

/** An answerer of recall_context calls through `expand`, answers within `maxTokens`. */
export declare function createRecall(
  expand: (req: MessageInitShape<typeof ExpandRequestSchema>) => Promise<ExpandResponse>,
  maxTokens?: number,
): Recall;

/** A message rendered for the model as recall answers render it (the Go package's Text). */
export declare function messageText(m: Message): string;

/** The source hash ("" for the conversation's newest) and the range of a citation. */
export declare function parseCitation(s: string): { source: string; range: string };

export interface RecallOptions extends CallOptions {
  /** The answer's bound in tokens (a quarter of its bytes); default DEFAULT_RECALL_MAX_TOKENS. */
  maxTokens?: number;
}

export interface CompactordClient {
  plan(req: MessageInitShape<typeof PlanRequestSchema>, opts?: CallOptions): Promise<PlanResponse>;
  compact(req: MessageInitShape<typeof CompactRequestSchema>, opts?: CallOptions): Promise<CompactResponse>;
  lower(req: MessageInitShape<typeof LowerRequestSchema>, opts?: CallOptions): Promise<LowerResponse>;
  lift(body: string | Uint8Array | object, provider?: ProviderName | Provider, opts?: CallOptions): Promise<LiftResponse>;
  /** The original messages behind a summary (or a source hash), one page at a time. */
  expand(req: MessageInitShape<typeof ExpandRequestSchema>, opts?: CallOptions): Promise<ExpandResponse>;
  /** Answers the model's recall_context call (CompactResponse.recallTool) through expand. */
  recall(conversation: Message[], args: string | RecallArguments, opts?: RecallOptions): Promise<string>;
  /** Lift, compact and lower in one call; resolves to the JSON body. */
  compactBody(body: string | Uint8Array | object, opts?: CompactBodyOptions): Promise<string>;
  close(): void;
}

export declare function createClient(opts: ClientOptions): CompactordClient;

/** The grpc-js service definition of CompactorService (for servers, e.g. test doubles). */
export declare const CompactorServiceDefinition: import("@grpc/grpc-js").ServiceDefinition;
