/**
 * One streamed chat completion against LLM_BASE_URL, with the retry policy: connection errors,
 * timeouts, 408/409/429/5xx, truncated streams and mid-stream error events are retried with
 * exponential backoff (Retry-After honoured); 402 (the episode budget is spent) and other 4xx end
 * the session at once. Uses only the global fetch of Node 18+.
 */
import { performance } from "node:perf_hooks";
import type { ChatMessage } from "../contract.js";
import {
  type AssembledAnswer,
  assembleResponse,
  ChatStreamAccumulator,
  StreamErrorChunk,
} from "./completion.js";
import { SseDecoder } from "./sse.js";

export interface ChatClientOptions {
  baseUrl: string;
  model: string;
  apiKey: string | undefined;
  timeoutMs: number;
  retries: number;
  retryBaseMs: number;
  userAgent: string;
}

export type CompletionOutcome =
  | {
      kind: "answer";
      answer: AssembledAnswer;
      retries: number;
      /** `code: message` of each failed attempt before the answer. */
      errors: string[];
      ttfbMs: number | null;
      llmMs: number;
    }
  | {
      kind: "fatal";
      reason: "budget_exhausted" | "llm_error";
      code: string;
      detail: string;
      retries: number;
      errors: string[];
      llmMs: number;
    };

/**
 * The most a single model answer may carry (body bytes, streamed or not). A real answer is a few
 * KiB to a few hundred; a policy that answers with gigabytes must not take the agent's memory.
 */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/** A failed attempt: `retryable` decides between another attempt and the end of the session. */
class AttemptError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly retryable: boolean,
    readonly budget = false,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

const MAX_BACKOFF_MS = 30_000;
const MAX_RETRY_AFTER_MS = 60_000;

export type Sleep = (ms: number, signal: AbortSignal) => Promise<void>;

export const abortableSleep: Sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });

export class ChatClient {
  constructor(
    private readonly opts: ChatClientOptions,
    private readonly sleep: Sleep = abortableSleep,
  ) {}

  /** Throws only when `signal` aborts (the session is ending); every other failure is an outcome. */
  async complete(
    messages: ChatMessage[],
    tools: object[],
    turn: number,
    signal: AbortSignal,
  ): Promise<CompletionOutcome> {
    const started = performance.now();
    const body = JSON.stringify({
      model: this.opts.model,
      messages,
      tools,
      tool_choice: "auto",
      stream: true,
      stream_options: { include_usage: true },
    });
    let retries = 0;
    const errors: string[] = [];
    for (let attempt = 0; ; attempt++) {
      try {
        const r = await this.attempt(body, turn, signal);
        return {
          kind: "answer",
          answer: r.answer,
          ttfbMs: r.ttfbMs,
          retries,
          errors,
          llmMs: performance.now() - started,
        };
      } catch (e) {
        if (signal.aborted) throw signal.reason ?? e;
        const err =
          e instanceof AttemptError
            ? e
            : new AttemptError("llm_internal", (e as Error).message ?? String(e), false);
        errors.push(`${err.code}: ${err.message.slice(0, 300)}`);
        if (!err.retryable || attempt >= this.opts.retries) {
          return {
            kind: "fatal",
            reason: err.budget ? "budget_exhausted" : "llm_error",
            code: err.code,
            detail: err.message,
            retries,
            errors,
            llmMs: performance.now() - started,
          };
        }
        retries++;
        const backoff = Math.min(MAX_BACKOFF_MS, this.opts.retryBaseMs * 2 ** attempt);
        const jittered = backoff * (0.75 + Math.random() * 0.5);
        const wait =
          err.retryAfterMs !== undefined ? Math.min(err.retryAfterMs, MAX_RETRY_AFTER_MS) : jittered;
        process.stderr.write(
          `[agent] turn ${turn}: ${err.code} (${err.message}); retry ${retries} in ${Math.round(wait)} ms\n`,
        );
        await this.sleep(wait, signal);
      }
    }
  }

  private async attempt(
    body: string,
    turn: number,
    outer: AbortSignal,
  ): Promise<{ answer: AssembledAnswer; ttfbMs: number | null }> {
    const started = performance.now();
    // One controller per attempt, aborted by the attempt's timeout or the session's signal
    // (AbortSignal.any is not in Node 18).
    const ctl = new AbortController();
    const onOuter = () => ctl.abort(outer.reason);
    outer.addEventListener("abort", onOuter, { once: true });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ctl.abort(new Error("timeout"));
    }, this.opts.timeoutMs);
    try {
      const headers: Record<string, string> = {
        "content-type": "application/json",
        accept: "text/event-stream, application/json",
        "user-agent": this.opts.userAgent,
      };
      if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`;
      let res: Response;
      try {
        res = await fetch(`${this.opts.baseUrl}/chat/completions`, {
          method: "POST",
          headers,
          body,
          signal: ctl.signal,
        });
      } catch (e) {
        if (timedOut)
          throw new AttemptError("llm_timeout", `no response within ${this.opts.timeoutMs} ms`, true);
        throw connectionError(e);
      }
      if (!res.ok) throw await httpError(res);
      const type = res.headers.get("content-type") ?? "";
      try {
        if (!type.includes("text/event-stream")) {
          const text = await readCapped(res, MAX_ANSWER_BYTES);
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            throw new AttemptError(
              "llm_bad_response",
              `unparseable response body: ${text.slice(0, 200)}`,
              true,
            );
          }
          return { answer: assembleResponse(json, turn), ttfbMs: performance.now() - started };
        }
        return await readStream(res, turn, started);
      } catch (e) {
        if (e instanceof AttemptError) throw e;
        if (e instanceof StreamErrorChunk)
          throw new AttemptError("llm_stream_error", e.message, !e.budget, e.budget);
        if (timedOut)
          throw new AttemptError("llm_timeout", `stream stalled past ${this.opts.timeoutMs} ms`, true);
        if (outer.aborted) throw e;
        throw new AttemptError("llm_stream_truncated", `stream broke: ${describeFetchError(e)}`, true);
      }
    } finally {
      clearTimeout(timer);
      outer.removeEventListener("abort", onOuter);
    }
  }
}

async function readStream(
  res: Response,
  turn: number,
  started: number,
): Promise<{ answer: AssembledAnswer; ttfbMs: number | null }> {
  const acc = new ChatStreamAccumulator();
  const sse = new SseDecoder();
  const decoder = new TextDecoder();
  let ttfbMs: number | null = null;
  let sawDone = false;
  const handle = (events: { data: string }[]) => {
    for (const ev of events) {
      if (ttfbMs === null) ttfbMs = performance.now() - started;
      const data = ev.data.trim();
      if (data === "[DONE]") {
        sawDone = true;
        continue;
      }
      if (data === "") continue;
      let chunk: unknown;
      try {
        chunk = JSON.parse(data);
      } catch {
        throw new AttemptError("llm_bad_response", `unparseable stream chunk: ${data.slice(0, 200)}`, true);
      }
      acc.add(chunk);
    }
  };
  const reader = res.body?.getReader();
  if (!reader) throw new AttemptError("llm_stream_truncated", "empty response body", true);
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      if (bytes > MAX_ANSWER_BYTES) throw tooLarge();
      handle(sse.push(decoder.decode(value, { stream: true })));
      if (sawDone) break;
    }
    handle(sse.push(decoder.decode()));
    handle(sse.end());
  } finally {
    reader.cancel().catch(() => {});
  }
  const answer = acc.result(turn);
  // Without [DONE] the stream is complete only if the model's answer says it finished.
  if (!sawDone && answer.finishReason === null)
    throw new AttemptError(
      "llm_stream_truncated",
      `stream ended after ${acc.chunks} chunks without a finish`,
      true,
    );
  if (acc.chunks === 0) throw new AttemptError("llm_stream_truncated", "stream carried no chunks", true);
  return { answer, ttfbMs };
}

/** Not retried: the same policy would answer the same way again. */
function tooLarge(): AttemptError {
  return new AttemptError(
    "llm_response_too_large",
    `the answer exceeded ${MAX_ANSWER_BYTES} bytes; stopped reading`,
    false,
  );
}

/** The body as text, refusing (and cancelling) past `cap` bytes. */
async function readCapped(res: Response, cap: number): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return "";
  const parts: Uint8Array[] = [];
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      if (bytes > cap) throw tooLarge();
      parts.push(value);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  return Buffer.concat(parts).toString("utf8");
}

async function httpError(res: Response): Promise<AttemptError> {
  const status = res.status;
  let text = "";
  try {
    text = (await readCapped(res, 64 * 1024)).slice(0, 2000);
  } catch {
    // The body is only for the message.
  }
  let message = text;
  let type = "";
  try {
    const j = JSON.parse(text) as { error?: { message?: string; type?: string } | string };
    if (typeof j.error === "string") message = j.error;
    else if (j.error?.message) message = j.error.message;
    if (typeof j.error === "object" && j.error?.type) type = j.error.type;
  } catch {
    // Not JSON: keep the raw text.
  }
  const detail = `HTTP ${status}${type ? ` (${type})` : ""}: ${message.trim() || res.statusText}`;
  const code = `llm_http_${status}`;
  if (status === 402) return new AttemptError(code, detail, false, true);
  const retryable = status === 408 || status === 409 || status === 429 || status >= 500;
  return new AttemptError(code, detail, retryable, false, retryable ? retryAfterMs(res) : undefined);
}

function retryAfterMs(res: Response): number | undefined {
  const h = res.headers.get("retry-after");
  if (!h) return undefined;
  const secs = Number(h);
  if (Number.isFinite(secs) && secs >= 0) return secs * 1000;
  const date = Date.parse(h);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** Connection refused / no route / no such host: the endpoint is not there, as opposed to a reset. */
const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);

function connectionError(e: unknown): AttemptError {
  const code = (e as { cause?: { code?: string } })?.cause?.code ?? "";
  return new AttemptError(
    UNREACHABLE.has(code) ? "llm_unreachable" : "llm_connection_error",
    describeFetchError(e),
    true,
  );
}

function describeFetchError(e: unknown): string {
  const err = e as { message?: string; cause?: { code?: string; message?: string } };
  const cause = err?.cause?.code ?? err?.cause?.message;
  return cause ? `${err.message ?? "fetch failed"} (${cause})` : (err?.message ?? String(e));
}
