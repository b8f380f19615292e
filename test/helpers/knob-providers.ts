/**
 * Two OpenAI-compatible provider stand-ins on loopback that read a request's knobs as real servers
 * do, and bill what they generate whether or not they report it:
 *  - "pydantic": lax validation as vLLM and SGLang validate requests (pydantic v2 lax mode): `stream`
 *    takes true/false, 0/1 and the strings "yes"/"no"/"true"/"false"/"on"/"off"/"1"/"0"/…, `n` and
 *    `max_tokens` take integers, integral floats and digit strings ("8.0" is 8); anything else is a
 *    400 (nothing billed);
 *  - "javascript": JavaScript truthiness and Number(): [] and {} are true, "8.0" is 8.
 * Each generates `max_tokens` completion tokens per choice (the worst case) and bills the prompt at
 * a quarter of the body's bytes (never above the meter's estimate). A stream reports usage only
 * when `stream_options.include_usage` reads as true; a JSON answer always does.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { compilePrices, loadAllowlist, loadPriceTable } from "../../src/meter/index.js";

export type Reader = "pydantic" | "javascript";

export interface BilledCall {
  stream: boolean;
  n: number;
  maxTokens: number;
  promptTokens: number;
  completionTokens: number;
  pico: bigint;
  usageReported: boolean;
}

export interface KnobProvider {
  url: string;
  reader: Reader;
  /** Calls the provider answered (and billed), in order. */
  billed: BilledCall[];
  /** Requests it refused as invalid (not billed). */
  refused: number;
  total(): bigint;
  close(): Promise<void>;
}

class Invalid extends Error {}

const TRUE_STRINGS = new Set(["1", "on", "t", "true", "y", "yes"]);
const FALSE_STRINGS = new Set(["0", "off", "f", "false", "n", "no"]);

/** pydantic v2 lax `bool` (Optional, default False). */
function laxBool(v: unknown): boolean {
  if (v === undefined || v === null) return false;
  if (typeof v === "boolean") return v;
  if (v === 0 || v === 1) return v === 1;
  if (typeof v === "string") {
    const s = v.toLowerCase();
    if (TRUE_STRINGS.has(s)) return true;
    if (FALSE_STRINGS.has(s)) return false;
  }
  throw new Invalid("Input should be a valid boolean");
}

/** pydantic v2 lax `int`: integral floats and digit strings (trailing ".0" stripped) are accepted. */
function laxInt(v: unknown, dflt: number): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v === "boolean") return v ? 1 : 0;
  if (typeof v === "number" && Number.isInteger(v)) return v;
  if (typeof v === "string") {
    const m = /^\s*([+-]?\d+)(?:\.0*)?\s*$/.exec(v);
    if (m) return Number(m[1]);
  }
  throw new Invalid("Input should be a valid integer");
}

function jsCount(v: unknown, dflt: number): number {
  if (v === undefined || v === null) return dflt;
  const x = Math.trunc(Number(v));
  return Number.isFinite(x) && x > 0 ? x : 0;
}

interface Knobs {
  stream: boolean;
  n: number;
  maxTokens: number;
  includeUsage: boolean;
}

function readKnobs(reader: Reader, body: Record<string, unknown>): Knobs {
  const so = (body.stream_options ?? undefined) as Record<string, unknown> | undefined;
  if (reader === "javascript")
    return {
      stream: Boolean(body.stream),
      n: jsCount(body.n, 1),
      maxTokens: jsCount(body.max_tokens, 4096),
      includeUsage: Boolean(so?.include_usage),
    };
  const n = laxInt(body.n, 1);
  const maxTokens = laxInt(body.max_tokens, 4096);
  if (n < 1 || maxTokens < 1) throw new Invalid("must be at least 1");
  return { stream: laxBool(body.stream), n, maxTokens, includeUsage: laxBool(so?.include_usage) };
}

export async function startKnobProvider(reader: Reader): Promise<KnobProvider> {
  const prices = compilePrices(loadAllowlist(), loadPriceTable());
  const state: KnobProvider = {
    url: "",
    reader,
    billed: [],
    refused: 0,
    total: () => state.billed.reduce((a, c) => a + c.pico, 0n),
    close: async () => {},
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const body = JSON.parse(raw.toString("utf8")) as Record<string, unknown>;
    let k: Knobs;
    try {
      k = readKnobs(reader, body);
    } catch (err) {
      if (!(err instanceof Invalid)) throw err;
      state.refused++;
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: err.message, type: "BadRequestError", code: 400 } }));
      return;
    }
    const model = String(body.model);
    const price = prices.get(model)!;
    const promptTokens = Math.ceil(raw.length / 4);
    const completionTokens = k.n * k.maxTokens;
    const usageReported = !k.stream || k.includeUsage;
    state.billed.push({
      stream: k.stream,
      n: k.n,
      maxTokens: k.maxTokens,
      promptTokens,
      completionTokens,
      pico: BigInt(promptTokens) * price.prompt + BigInt(completionTokens) * price.completion,
      usageReported,
    });
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    };
    const choices = Array.from({ length: k.n }, (_, index) => index);
    if (!k.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: "chatcmpl-knobs",
          object: "chat.completion",
          model,
          choices: choices.map((index) => ({
            index,
            message: { role: "assistant", content: "ok" },
            finish_reason: "length",
          })),
          usage,
        }),
      );
      return;
    }
    const ev = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
    const base = { id: "chatcmpl-knobs", object: "chat.completion.chunk", model };
    let out = "";
    for (const index of choices)
      out += ev({
        ...base,
        choices: [{ index, delta: { role: "assistant", content: "ok" }, finish_reason: null }],
      });
    for (const index of choices)
      out += ev({ ...base, choices: [{ index, delta: {}, finish_reason: "length" }] });
    if (k.includeUsage) out += ev({ ...base, choices: [], usage });
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(`${out}data: [DONE]\n\n`);
  };
  const server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(err));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}
