// Answering the model's recall_context calls (CompactResponse.recallTool) through Expand:
// the same contract as the Go package recalltool and the Python client's recall. A citation
// ("m12–m18", optionally after the source hash it names) returns the cited original
// messages; a query returns the messages of the sources the conversation names whose text
// holds the query's words, best first, bounded in tokens (a quarter of the answer's bytes).
import { Role, MessageKind } from "../gen/compactor/v1/conversation_pb.js";

/** The name the model calls the tool by. */
export const RECALL_TOOL_NAME = "recall_context";
/** The most an answer takes unless told otherwise. */
export const DEFAULT_RECALL_MAX_TOKENS = 4000;

const MAX_SOURCES = 32;
const CITATION =
  /^\[?\s*(?:compactord\s+source\s+)?(?:([0-9a-fA-F]{64})[\s:/@#]*)?\[?(m?\d{1,9}(?:\s*(?:–|—|-|\.\.)\s*m?\d{1,9})?)\]?\s*(?:[:,;][\s\S]*)?\]?$/;
const MARKER = /compactord source ([0-9a-f]{64}) (m\d{1,9}(?:[–-]m\d{1,9})?)/g;
const WORD = /[\p{L}\p{N}_.\-/:]+/gu;

/** A recall_context call the model should be told is wrong; the message says why. */
export class RecallError extends Error {
  constructor(message) {
    super(message);
    this.name = "RecallError";
  }
}

/**
 * The source hash ("" for the conversation's newest) and the range of a citation; the server
 * parses the range (Expand's range), so every form a summary writes is read in one place.
 */
export function parseCitation(s) {
  const m = CITATION.exec(s.trim());
  if (!m) throw new RecallError(`${JSON.stringify(s.slice(0, 80))} is not a citation (want m12, m12–m18, or a source hash and a range)`);
  return { source: (m[1] ?? "").toLowerCase(), range: m[2] };
}

/** The citation and query of a call's input (JSON text or an object). */
export function parseCall(args) {
  if (typeof args === "string") {
    try {
      args = JSON.parse(args);
    } catch (e) {
      throw new RecallError(`recall_context: the input is not a JSON object: ${e.message}`);
    }
  }
  if (args === null || typeof args !== "object") throw new RecallError("recall_context: the input is not a JSON object");
  const citation = args.citation ?? "";
  const query = args.query ?? "";
  if (typeof citation !== "string" || typeof query !== "string") throw new RecallError("recall_context: citation and query are strings");
  if (!citation.trim() && !query.trim()) throw new RecallError("recall_context: give a citation or a query");
  return { citation: citation.trim(), query: query.trim() };
}

function outputText(o) {
  const v = o?.value;
  switch (v?.case) {
    case "text":
    case "json":
      return v.value;
    case "errorText":
    case "errorJson":
      return "error: " + v.value;
    case "content":
      return v.value.parts.filter((p) => p.content.case === "text").map((p) => p.content.value.text).join("\n");
    case "denied":
      return "denied: " + v.value;
  }
  return "";
}

/**
 * m rendered for the model, as the Go package's Text: text parts as they are, a tool call as
 * "[tool call <name>] <input JSON>", a tool result as "[tool result <name>] <output>", one
 * part a line; parts with no text as "[<kind>]".
 */
export function messageText(m) {
  return m.parts
    .map((p) => {
      const c = p.content;
      switch (c.case) {
        case "text":
          return c.value.text;
        case "toolCall":
          return `[tool call ${c.value.toolName}] ${c.value.inputJson}`;
        case "toolResult":
          return `[tool result ${c.value.toolName}] ${outputText(c.value.output)}`;
        case "image":
          return "[image]";
        case "file":
          return `[file ${c.value.filename}]`;
        case "reasoning":
          return "[reasoning]";
      }
      return "[part]";
    })
    .join("\n");
}

const markers = (text) => [...text.matchAll(MARKER)].map((m) => [m[1], m[2]]);
const tokens = (s) => Math.ceil(Buffer.byteLength(s) / 4);
const roleName = (r) => String(Role[r] ?? r).toLowerCase();

function clip(s, n) {
  const b = Buffer.from(s);
  if (b.length <= n) return s;
  let k = n;
  while (k > 0 && (b[k] & 0xc0) === 0x80) k--;
  return b.subarray(0, k).toString() + "…";
}

function newestSource(conv) {
  let last = "";
  for (let k = conv.length - 1; k >= 0; k--) {
    const cs = markers(messageText(conv[k]));
    if (!cs.length) continue;
    if (conv[k].kind === MessageKind.COMPACT_SUMMARY) return cs[cs.length - 1][0];
    if (!last) last = cs[cs.length - 1][0];
  }
  return last;
}

/**
 * An answerer of recall_context calls through `expand` (a function of an ExpandRequest init
 * to a promise of its ExpandResponse), answers within `maxTokens`.
 */
export function createRecall(expand, maxTokens = DEFAULT_RECALL_MAX_TOKENS) {
  const budget = maxTokens || DEFAULT_RECALL_MAX_TOKENS;
  async function read(source, range) {
    const req = { sourceHash: source, range, pageToken: "" };
    const out = [];
    for (;;) {
      const page = await expand(req);
      page.messages.forEach((m, k) => out.push({ message: m, hash: source, index: page.firstIndex + k }));
      if (!page.nextPageToken) return out;
      req.pageToken = page.nextPageToken;
    }
  }
  const r = {
    /** The original messages a citation names (naming no source: the conversation's newest). */
    async cited(conv, citation) {
      let { source, range } = parseCitation(citation);
      if (!source) source = newestSource(conv);
      if (!source) throw new RecallError("recall_context: the conversation names no source; cite one by its hash");
      return read(source, range);
    },
    /** The messages of the sources the conversation names holding query's words, best first. */
    async search(conv, query) {
      const terms = [...new Set((query.toLowerCase().match(WORD) ?? []).map((w) => w.replace(/^[.\-/:]+|[.\-/:]+$/g, "")).filter(Boolean))];
      if (!terms.length) throw new RecallError(`recall_context: the query ${JSON.stringify(query.slice(0, 80))} has no words`);
      const phrase = query.trim().toLowerCase();
      const queue = conv.flatMap((m) => markers(messageText(m)).map((c) => ({ c, depth: 0 })));
      const seen = new Set();
      const have = new Set();
      const hits = [];
      while (queue.length && seen.size < MAX_SOURCES) {
        const { c, depth } = queue.shift();
        const key = c.join(" ");
        if (seen.has(key)) continue;
        seen.add(key);
        for (const s of await read(c[0], c[1])) {
          const id = `${s.hash} ${s.index}`;
          if (have.has(id)) continue;
          have.add(id);
          const text = messageText(s.message);
          for (const n of markers(text)) queue.push({ c: n, depth: depth + 1 });
          const lower = text.toLowerCase();
          let score = 2 * terms.filter((t) => lower.includes(t)).length;
          if (!score) continue;
          if (terms.length > 1 && lower.includes(phrase)) score++;
          hits.push({ s, score, depth });
        }
      }
      hits.sort((a, b) => b.score - a.score || a.depth - b.depth || b.s.index - a.s.index);
      return hits.map((h) => h.s);
    },
    /**
     * The text answering a call with input `args` for `conv`, the conversation the model saw:
     * each message under a line naming it ("[<hash> m12 user]").
     */
    async answer(conv, args) {
      const { citation, query } = parseCall(args);
      const found = citation ? await r.cited(conv, citation) : await r.search(conv, query);
      if (!found.length) return `No compacted-away message matches ${JSON.stringify(query)}.`;
      let out = "";
      for (const [k, s] of found.entries()) {
        const name = `${s.hash} m${s.index}`;
        let block = `[${name} ${roleName(s.message.role)}]\n${messageText(s.message)}\n`;
        if (k === 0 && !citation && tokens(block) > budget) {
          const note = `\n[cut to the answer's ${budget} tokens: cite ${name} for all of it]\n`;
          block = clip(block, Math.max(0, 4 * budget - Buffer.byteLength(note))) + note;
        }
        if (k > 0 && tokens(out + block) > budget) {
          out += `[${found.length - k} more not shown: over the answer's ${budget} tokens; cite them one by one]\n`;
          break;
        }
        out += block;
      }
      return out;
    },
  };
  return r;
}
