/**
 * A small OpenAI-shaped upstream on loopback for the sidecar tests that need to see exactly what
 * the runtime sent and exactly which bytes it streamed: it records every request and every SSE
 * chunk it wrote, with a pause between chunks so each one travels as its own write.
 *
 * Models: any name answers `reply from <model> #<n>`; "fail-<status>" answers that HTTP status
 * with an OpenAI error body; "slow" waits `slowMs` before answering (parallelism tests); "tools"
 * answers with a tool call; "cut" streams two chunks and drops the connection; "busy-once-<tag>"
 * answers 429 the first time it is asked, then normally; "long" ends with finish_reason "length".
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

export interface RecordedRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  body: Record<string, unknown> | undefined;
}

export interface FakeUpstream {
  /** Base URL with /v1. */
  url: string;
  requests: RecordedRequest[];
  /** The exact SSE chunks written, per streamed request (in order of arrival). */
  streams: string[][];
  /** Remaining budget it reports (header and GET /v1/budget). */
  remainingUsd: number;
  chatRequests(): RecordedRequest[];
  /** The most "slow" calls seen waiting at the same time (parallelism, without a clock). */
  readonly maxSlowInFlight: number;
  close(): Promise<void>;
}

export interface FakeUpstreamOptions {
  host?: string;
  chunkDelayMs?: number;
  slowMs?: number;
  /** Required bearer token; undefined accepts any request. */
  token?: string;
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown> | undefined> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  if (chunks.length === 0) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

export async function startFakeUpstream(opts: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const chunkDelayMs = opts.chunkDelayMs ?? 15;
  const slowMs = opts.slowMs ?? 300;
  const requests: RecordedRequest[] = [];
  const streams: string[][] = [];
  let n = 0;
  const busySeen = new Set<string>();
  const state = { remainingUsd: 0.25, slowInFlight: 0, maxSlowInFlight: 0 };

  const server = createServer((req, res) => {
    void (async () => {
      const body = await readJson(req);
      const path = (req.url ?? "/").split("?")[0] ?? "/";
      requests.push({ method: req.method ?? "", path, authorization: req.headers.authorization, body });
      if (opts.token !== undefined && req.headers.authorization !== `Bearer ${opts.token}`) {
        send(res, 401, { error: { message: "bad token", type: "auth", param: null, code: "unauthorized" } });
        return;
      }
      if (req.method === "GET" && path === "/v1/budget") {
        send(res, 200, {
          cap_usd: 0.3,
          spent_usd: 0.3 - state.remainingUsd,
          reserved_usd: 0,
          remaining_usd: state.remainingUsd,
        });
        return;
      }
      if (req.method !== "POST" || path !== "/v1/chat/completions" || !body) {
        send(res, 404, {
          error: { message: "not found", type: "invalid_request_error", param: null, code: null },
        });
        return;
      }
      const model = String(body.model);
      const fail = /^fail-(\d{3})$/.exec(model);
      if (fail) {
        send(res, Number(fail[1]), {
          error: {
            message: `refused ${model}`,
            type: fail[1] === "402" ? "cap" : "allowlist",
            param: null,
            code: "refused",
          },
        });
        return;
      }
      if (model.startsWith("busy-once-") && !busySeen.has(model)) {
        busySeen.add(model);
        send(res, 429, { error: { message: "busy", type: "rate_limit", param: null, code: null } });
        return;
      }
      if (model === "slow") {
        state.slowInFlight++;
        state.maxSlowInFlight = Math.max(state.maxSlowInFlight, state.slowInFlight);
        await sleep(slowMs);
        state.slowInFlight--;
      }
      n += 1;
      state.remainingUsd = Math.max(0, Math.round((state.remainingUsd - 0.01) * 1e6) / 1e6);
      const id = `chatcmpl-fake${n}`;
      const content = `reply from ${model} #${n}`;
      const toolCalls =
        model === "tools"
          ? [
              {
                id: `call_${n}`,
                type: "function",
                function: { name: "terminal", arguments: '{"command":"ls -la /app"}' },
              },
            ]
          : undefined;
      const usage = { prompt_tokens: 100 + n, completion_tokens: 10 + n, total_tokens: 110 + 2 * n };
      const budget = { "x-trajrl-budget-remaining-usd": state.remainingUsd.toFixed(6) };
      if (body.stream !== true) {
        send(
          res,
          200,
          {
            id,
            object: "chat.completion",
            created: 1_700_000_000,
            model,
            choices: [
              {
                index: 0,
                message: { role: "assistant", content, ...(toolCalls ? { tool_calls: toolCalls } : {}) },
                finish_reason: toolCalls ? "tool_calls" : model === "long" ? "length" : "stop",
              },
            ],
            usage,
          },
          budget,
        );
        return;
      }
      const written: string[] = [];
      streams.push(written);
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...budget });
      const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1_700_000_000, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      const events = [
        chunk({ role: "assistant", content: "" }),
        ...content.split(" ").map((w, i) => chunk({ content: i === 0 ? w : ` ${w}` })),
        ...(toolCalls
          ? [
              chunk({
                tool_calls: [
                  {
                    index: 0,
                    id: toolCalls[0]!.id,
                    type: "function",
                    function: { name: "terminal", arguments: "" },
                  },
                ],
              }),
              chunk({ tool_calls: [{ index: 0, function: { arguments: '{"command":' } }] }),
              chunk({ tool_calls: [{ index: 0, function: { arguments: '"ls -la /app"}' } }] }),
            ]
          : []),
        ": keep-alive\n\n",
        chunk({}, toolCalls ? "tool_calls" : model === "long" ? "length" : "stop"),
      ];
      const so = body.stream_options as { include_usage?: boolean } | undefined;
      if (so?.include_usage)
        events.push(
          `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1_700_000_000, model, choices: [], usage })}\n\n`,
        );
      events.push("data: [DONE]\n\n");
      for (const [i, e] of events.entries()) {
        if (res.destroyed) return;
        // "cut": the connection dies after the second chunk, as a provider's stream sometimes does.
        if (model === "cut" && i === 2) {
          res.destroy();
          return;
        }
        res.write(e);
        written.push(e);
        await sleep(chunkDelayMs);
      }
      res.end();
    })().catch((err: unknown) => {
      if (!res.headersSent)
        send(res, 500, { error: { message: String(err), type: "server_error", param: null, code: null } });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, opts.host ?? "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${opts.host ?? "127.0.0.1"}:${port}/v1`,
    requests,
    streams,
    get remainingUsd() {
      return state.remainingUsd;
    },
    get maxSlowInFlight() {
      return state.maxSlowInFlight;
    },
    set remainingUsd(v: number) {
      state.remainingUsd = v;
    },
    chatRequests: () => requests.filter((r) => r.path === "/v1/chat/completions"),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Read an SSE response body as the list of raw chunks the client received, split on event boundaries. */
export function splitEvents(raw: string): string[] {
  const out: string[] = [];
  let rest = raw;
  for (;;) {
    const i = rest.indexOf("\n\n");
    if (i < 0) break;
    out.push(rest.slice(0, i + 2));
    rest = rest.slice(i + 2);
  }
  if (rest) out.push(rest);
  return out;
}
