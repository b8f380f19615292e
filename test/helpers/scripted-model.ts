/**
 * A scripted OpenAI-shaped chat completions server on loopback, for the agent's tests (and any
 * test that needs a model which answers exactly as told): each request gets the next scripted
 * reply, streamed as real SSE (fragments, CRLF or LF, comments) or as JSON, or an HTTP error, a
 * cut connection, a mid-stream error chunk. Every request is recorded.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface ScriptedToolCall {
  id?: string;
  name: string;
  /** Raw arguments text, sent as is (may be malformed on purpose). */
  arguments: string;
}

export interface ScriptedReply {
  /** HTTP status; anything but 200 answers with `errorBody` (OpenAI error JSON by default). */
  status?: number;
  headers?: Record<string, string>;
  errorBody?: unknown;
  content?: string;
  reasoning?: string;
  toolCalls?: ScriptedToolCall[];
  finishReason?: string | null;
  usage?: { prompt_tokens: number; completion_tokens: number; cached_tokens?: number } | null;
  /** "json": a non-stream chat.completion body even when a stream was asked for. */
  mode?: "sse" | "json";
  /** Characters per arguments/content fragment (default 7). */
  fragment?: number;
  lineEnding?: "\n" | "\r\n";
  /** Destroy the socket after this many chunks (a truncated stream). */
  cutAfterChunks?: number;
  /** Send this object as an `error` chunk after the first chunk. */
  errorChunk?: object;
  /** Omit `data: [DONE]`. */
  noDone?: boolean;
  /** Wait before answering (ms). */
  delayMs?: number;
  /** Never answer (the client must time out or be aborted). */
  hang?: boolean;
}

export interface RecordedRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: {
    model?: string;
    messages: { role: string; content: string | null; tool_calls?: unknown[]; tool_call_id?: string }[];
    tools?: { function: { name: string } }[];
    stream?: boolean;
    [k: string]: unknown;
  };
}

export type Script = ScriptedReply[] | ((req: RecordedRequest, index: number) => ScriptedReply);

export interface ScriptedModel {
  url: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

const split = (s: string, n: number): string[] => {
  if (s === "") return [];
  const out: string[] = [];
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n));
  return out;
};

export function replyChunks(r: ScriptedReply, model = "scripted"): object[] {
  const n = Math.max(1, r.fragment ?? 7);
  const base = { id: "chatcmpl-scripted", object: "chat.completion.chunk", created: 0, model };
  const chunk = (delta: object, finish: string | null = null) => ({
    ...base,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  const chunks: object[] = [chunk({ role: "assistant", content: "" })];
  for (const piece of split(r.reasoning ?? "", n)) chunks.push(chunk({ reasoning_content: piece }));
  for (const piece of split(r.content ?? "", n)) chunks.push(chunk({ content: piece }));
  (r.toolCalls ?? []).forEach((c, index) => {
    const pieces = split(c.arguments, n);
    chunks.push(
      chunk({
        tool_calls: [
          {
            index,
            id: c.id ?? `call_${index}`,
            type: "function",
            function: { name: c.name, arguments: pieces[0] ?? "" },
          },
        ],
      }),
    );
    for (const p of pieces.slice(1))
      chunks.push(chunk({ tool_calls: [{ index, function: { arguments: p } }] }));
  });
  const finish =
    r.finishReason === undefined ? (r.toolCalls?.length ? "tool_calls" : "stop") : r.finishReason;
  chunks.push(chunk({}, finish));
  if (r.usage !== null) {
    const u = r.usage ?? { prompt_tokens: 10, completion_tokens: 5 };
    chunks.push({
      ...base,
      choices: [],
      usage: {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        total_tokens: u.prompt_tokens + u.completion_tokens,
        prompt_tokens_details: { cached_tokens: u.cached_tokens ?? 0 },
      },
    });
  }
  return chunks;
}

function jsonBody(r: ScriptedReply, model: string): object {
  const message: Record<string, unknown> = { role: "assistant", content: r.content ?? null };
  if (r.toolCalls?.length)
    message.tool_calls = r.toolCalls.map((c, i) => ({
      id: c.id ?? `call_${i}`,
      type: "function",
      function: { name: c.name, arguments: c.arguments },
    }));
  const u = r.usage ?? { prompt_tokens: 10, completion_tokens: 5 };
  return {
    id: "chatcmpl-scripted",
    object: "chat.completion",
    created: 0,
    model,
    choices: [
      {
        index: 0,
        message,
        finish_reason:
          r.finishReason === undefined ? (r.toolCalls?.length ? "tool_calls" : "stop") : r.finishReason,
      },
    ],
    usage: { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens },
  };
}

async function answer(res: ServerResponse, r: ScriptedReply, model: string): Promise<void> {
  if (r.delayMs) await new Promise((ok) => setTimeout(ok, r.delayMs));
  const status = r.status ?? 200;
  if (status !== 200) {
    res.writeHead(status, { "content-type": "application/json", ...r.headers });
    res.end(
      JSON.stringify(
        r.errorBody ?? { error: { message: `scripted ${status}`, type: "scripted", code: status } },
      ),
    );
    return;
  }
  if (r.mode === "json") {
    res.writeHead(200, { "content-type": "application/json", ...r.headers });
    res.end(JSON.stringify(jsonBody(r, model)));
    return;
  }
  const eol = r.lineEnding ?? "\n";
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...r.headers });
  res.write(`: scripted stream${eol}${eol}`);
  const chunks = replyChunks(r, model);
  for (let i = 0; i < chunks.length; i++) {
    if (r.cutAfterChunks !== undefined && i >= r.cutAfterChunks) {
      // Let what was written reach the client first: a cut after data, not a refused request.
      await new Promise((ok) => setTimeout(ok, 30));
      res.socket?.destroy();
      return;
    }
    res.write(`data: ${JSON.stringify(chunks[i])}${eol}${eol}`);
    if (i === 0 && r.errorChunk) {
      res.write(`data: ${JSON.stringify({ error: r.errorChunk })}${eol}${eol}`);
      res.end();
      return;
    }
  }
  if (!r.noDone) res.write(`data: [DONE]${eol}${eol}`);
  res.end();
}

export async function startScriptedModel(
  script: Script,
  /** `host`: where to listen (default 127.0.0.1; a test network's gateway serves its containers). */
  opts: { model?: string; host?: string } = {},
): Promise<ScriptedModel> {
  const requests: RecordedRequest[] = [];
  const model = opts.model ?? "scripted";
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (d: Buffer) => parts.push(d));
    req.on("end", () => {
      let body: RecordedRequest["body"];
      try {
        body = JSON.parse(Buffer.concat(parts).toString("utf8"));
      } catch {
        res.writeHead(400, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "bad json", type: "invalid_request_error" } }));
        return;
      }
      const rec: RecordedRequest = { path: req.url ?? "", headers: req.headers, body };
      const index = requests.length;
      requests.push(rec);
      const reply = typeof script === "function" ? script(rec, index) : script[index];
      if (!reply) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(
          JSON.stringify({ error: { message: `script exhausted at request ${index}`, type: "scripted" } }),
        );
        return;
      }
      if (reply.hang) return;
      answer(res, reply, model).catch(() => res.destroy());
    });
  });
  const host = opts.host ?? "127.0.0.1";
  await new Promise<void>((ok) => server.listen(0, host, ok));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
