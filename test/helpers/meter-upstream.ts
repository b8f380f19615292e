/**
 * A small OpenAI-shaped upstream on loopback for the meter's tests and benchmark (stands in for the
 * Engy simulator): stream + non-stream, tool calls, usage with prompt_tokens_details.cached_tokens,
 * X-Engy-Request-Id, and scripted faults. It records what it received and the exact bytes it sent.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface UsageSpec {
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens?: number;
}

export type Fault =
  | { kind: "status"; status: number; retryAfter?: string; body?: string }
  | { kind: "cut"; afterEvents: number }
  | { kind: "mid_error"; afterEvents: number }
  | { kind: "first_event_error" }
  | { kind: "no_usage" }
  | { kind: "hang" }
  | { kind: "stall"; ms: number };

export interface Answer {
  content?: string;
  toolCalls?: { name: string; arguments: string }[];
  /** Usage to report; default derived from the request. */
  usage?: UsageSpec | ((req: Record<string, unknown>) => UsageSpec);
  /** Stream pieces of the content (default: split on spaces, kept). */
  pieces?: string[];
  /** SSE line ending. */
  crlf?: boolean;
  /** Interleave ": keep-alive" comments. */
  comments?: boolean;
  /** Put usage in the finish chunk instead of a separate choices:[] chunk (vLLM style). */
  usageInFinishChunk?: boolean;
  /** Think this long before answering (keeps calls in flight together). */
  delayMs?: number;
  /** Send the whole stream in one write (a fast provider: events and the usage chunk together). */
  oneWrite?: boolean;
  /** Wait this long between stream events (a provider generating slowly, never silent for long). */
  gapMs?: number;
}

export interface Received {
  body: Record<string, unknown>;
  /** The request body exactly as it arrived. */
  raw: string;
  authorization: string | undefined;
  aborted: boolean;
}

export interface TestUpstream {
  url: string;
  port: number;
  hits: number;
  /** Chat requests being answered right now, and the most at once. */
  inflight: number;
  maxInflight: number;
  /** TCP connections accepted (keep-alive keeps this low). */
  connections: number;
  received: Received[];
  /** Bytes of each response body, in order. */
  sent: Buffer[];
  /** Chat responses whose last byte was handed to the kernel ('finish'). */
  finished: number;
  faults: Fault[];
  answer: Answer;
  /** Resolves when the nth request (1-based) has been seen to be aborted by the client. */
  close(): Promise<void>;
}

export interface TestUpstreamOptions {
  apiKey?: string;
  answer?: Answer;
  /** Zero-work mode for benchmarks: nothing recorded per request. */
  lean?: boolean;
}

function defaultUsage(req: Record<string, unknown>, answer: Answer): UsageSpec {
  const u = answer.usage;
  if (typeof u === "function") return u(req);
  if (u) return u;
  const mt = typeof req.max_tokens === "number" ? req.max_tokens : 8192;
  return { prompt_tokens: 50, completion_tokens: Math.min(mt, 10), cached_tokens: 10 };
}

export async function startTestUpstream(opts: TestUpstreamOptions = {}): Promise<TestUpstream> {
  let seq = 0;
  const state: TestUpstream = {
    url: "",
    port: 0,
    hits: 0,
    inflight: 0,
    maxInflight: 0,
    connections: 0,
    received: [],
    sent: [],
    finished: 0,
    faults: [],
    answer: opts.answer ?? { content: "Hello from the test upstream." },
    close: async () => {},
  };
  const sockets = new Set<import("node:net").Socket>();

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === "GET" && req.url === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [] }));
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    state.hits++;
    state.inflight++;
    state.maxInflight = Math.max(state.maxInflight, state.inflight);
    res.once("close", () => state.inflight--);
    res.once("finish", () => state.finished++);
    const id = ++seq;
    const raw = Buffer.concat(chunks).toString("utf8");
    const body = JSON.parse(raw) as Record<string, unknown>;
    const rec: Received = { body, raw, authorization: req.headers.authorization, aborted: false };
    if (!opts.lean) state.received.push(rec);
    res.on("close", () => {
      if (!res.writableFinished) rec.aborted = true;
    });
    if (opts.apiKey && req.headers.authorization !== `Bearer ${opts.apiKey}`) {
      res.writeHead(401, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "bad key", type: "auth", code: "invalid_api_key" } }));
      return;
    }
    const fault = state.faults.shift();
    if (fault?.kind === "status") {
      const h: Record<string, string> = {
        "content-type": "application/json",
        "x-engy-request-id": `req-${id}`,
      };
      if (fault.retryAfter !== undefined) h["retry-after"] = fault.retryAfter;
      res.writeHead(fault.status, h);
      res.end(
        fault.body ??
          JSON.stringify({
            error: { message: `fault ${fault.status}`, type: "server_error", code: fault.status },
          }),
      );
      return;
    }
    if (fault?.kind === "hang") return; // never answers; the client must give up
    if (fault?.kind === "stall") await new Promise((r) => setTimeout(r, fault.ms));

    const a = state.answer;
    if (a.delayMs) await new Promise((r) => setTimeout(r, a.delayMs));
    const model = String(body.model);
    const usage = defaultUsage(body, a);
    const usageJson = {
      prompt_tokens: usage.prompt_tokens,
      completion_tokens: usage.completion_tokens,
      total_tokens: usage.prompt_tokens + usage.completion_tokens,
      prompt_tokens_details: { cached_tokens: usage.cached_tokens ?? 0 },
    };
    const rid = `req-${id}`;
    const cid = `chatcmpl-${id}`;
    const content = a.content ?? "";
    const tools = a.toolCalls ?? [];
    const finish = tools.length > 0 ? "tool_calls" : "stop";

    if (body.stream !== true) {
      const message: Record<string, unknown> = { role: "assistant", content: tools.length ? null : content };
      if (tools.length)
        message.tool_calls = tools.map((t, k) => ({
          id: `call_${k}`,
          type: "function",
          function: { name: t.name, arguments: t.arguments },
        }));
      const out: Record<string, unknown> = {
        id: cid,
        object: "chat.completion",
        created: 1_700_000_000,
        model,
        choices: [{ index: 0, message, finish_reason: finish }],
        x_engy: { request_id: `engy-${id}` },
      };
      if (fault?.kind !== "no_usage") out.usage = usageJson;
      const buf = Buffer.from(JSON.stringify(out));
      if (!opts.lean) state.sent.push(buf);
      res.writeHead(200, {
        "content-type": "application/json",
        "x-engy-request-id": rid,
        "content-length": buf.length,
      });
      res.end(buf);
      return;
    }

    const nl = a.crlf ? "\r\n" : "\n";
    const ev = (o: unknown) => `data: ${JSON.stringify(o)}${nl}${nl}`;
    const chunk = (
      delta: Record<string, unknown>,
      finishReason: string | null = null,
      extra: Record<string, unknown> = {},
    ) =>
      ev({
        id: cid,
        object: "chat.completion.chunk",
        created: 1_700_000_000,
        model,
        choices: [{ index: 0, delta, finish_reason: finishReason }],
        ...extra,
      });
    const events: string[] = [chunk({ role: "assistant", content: "" })];
    if (a.comments) events.push(`: keep-alive${nl}${nl}`);
    const pieces = a.pieces ?? (content ? content.split(/(?<= )/) : []);
    for (const p of pieces) events.push(chunk({ content: p }));
    tools.forEach((t, k) => {
      events.push(
        chunk({
          tool_calls: [
            { index: k, id: `call_${k}`, type: "function", function: { name: t.name, arguments: "" } },
          ],
        }),
      );
      const half = Math.floor(t.arguments.length / 2);
      for (const part of [t.arguments.slice(0, half), t.arguments.slice(half)])
        events.push(chunk({ tool_calls: [{ index: k, function: { arguments: part } }] }));
    });
    if (a.comments) events.push(`: keep-alive${nl}${nl}`);
    const wantUsage =
      (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
    const noUsage = fault?.kind === "no_usage";
    if (a.usageInFinishChunk && wantUsage && !noUsage)
      events.push(chunk({}, finish, { usage: usageJson, x_engy: { request_id: `engy-${id}` } }));
    else {
      events.push(chunk({}, finish, { x_engy: { request_id: `engy-${id}` } }));
      if (wantUsage && !noUsage)
        events.push(
          ev({
            id: cid,
            object: "chat.completion.chunk",
            created: 1_700_000_000,
            model,
            choices: [],
            usage: usageJson,
          }),
        );
    }
    events.push(`data: [DONE]${nl}${nl}`);
    if (fault?.kind === "first_event_error") {
      events.unshift(ev({ error: { message: "concurrency limit reached", type: "overloaded", code: 503 } }));
      events.length = 1;
    }
    if (fault?.kind === "mid_error") {
      events.splice(
        fault.afterEvents,
        events.length,
        ev({ error: { message: "model crashed", type: "server_error", code: "internal" } }),
      );
    }
    res.writeHead(200, {
      "content-type": "text/event-stream",
      "x-engy-request-id": rid,
      "cache-control": "no-cache",
    });
    const sent: Buffer[] = [];
    if (a.oneWrite && fault === undefined) {
      const all = Buffer.from(events.join(""));
      if (!opts.lean) state.sent.push(all);
      res.end(all);
      return;
    }
    for (const [k, e] of events.entries()) {
      if (fault?.kind === "cut" && k === fault.afterEvents) {
        // Half an event, then the socket dies.
        const half = Buffer.from(e.slice(0, Math.floor(e.length / 2)));
        sent.push(half);
        res.write(half);
        await new Promise((r) => setTimeout(r, 10));
        if (!opts.lean) state.sent.push(Buffer.concat(sent));
        res.socket?.destroy();
        return;
      }
      const b = Buffer.from(e);
      sent.push(b);
      res.write(b);
      // Separate TCP writes so the proxy sees several chunks.
      if (a.gapMs) await new Promise((r) => setTimeout(r, a.gapMs));
      else if (!opts.lean && k < 3) await new Promise((r) => setImmediate(r));
      if (res.destroyed) return;
    }
    if (!opts.lean) state.sent.push(Buffer.concat(sent));
    res.end();
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(err));
    });
  });
  server.on("connection", (s) => {
    state.connections++;
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  state.port = port;
  state.url = `http://127.0.0.1:${port}/v1`;
  state.close = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  return state;
}
