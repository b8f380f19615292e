/**
 * The simulator's chat-completions handler: validate the request, apply the fault plan, let the
 * brain plan the turn, count tokens, and answer whole or as a stream at the profile's speed.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { sha256Hex } from "../hash.js";
import type { Logger } from "../log.js";
import { type Plan, planTurn } from "./brain.js";
import type { PrefixCache } from "./cache.js";
import {
  type ChatRequest,
  chatRequestSchema,
  maxTokensOf,
  normaliseMessages,
  toolNamesOf,
} from "./conversation.js";
import {
  type Fault,
  FaultHeaderError,
  type FaultSchedule,
  mergeFaults,
  parseFaultHeader,
  type RequestFaults,
} from "./faults.js";
import { closedSignal, cutAfter, HttpError, invalid, readBody, sendError } from "./http.js";
import type { SimProfile } from "./profile.js";
import type { SimScenario } from "./scenarios.js";
import { promptTokens, type Tokenizer } from "./tokens.js";
import {
  applyMaxTokens,
  type Completion,
  completionBody,
  completionTokensOf,
  type ErrorShape,
  streamErrorEvent,
  streamEvents,
} from "./wire.js";

export const FAULT_HEADER = "x-sim-fault";

/** What the simulated provider billed one model: every answer it started, in full. */
export interface BilledTokens {
  requests: number;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
}

export interface EngySimStats {
  /** Chat-completion requests that passed auth and the model check (faulted ones included). */
  requests: number;
  byModel: Record<string, number>;
  /**
   * The provider's side of the bill, per model: every request it answered with a 200 is billed its
   * whole usage the moment it starts answering — also when the answer is cut, carries no usage, or
   * the client leaves before the end. A 429/503 or a 500 is not billed.
   */
  billed: Record<string, BilledTokens>;
}

/** What the handler shares with the server: configuration and the state that outlives a request. */
export interface ChatContext {
  seed: number;
  profile: SimProfile;
  scenarios: SimScenario[];
  faults: FaultSchedule;
  cache: PrefixCache;
  stats: EngySimStats;
  log: Logger;
  now: () => number;
  /** Multiplies every latency. */
  scale: number;
  /** Requests served so far (the request id's counter). */
  served: number;
  tokenizer: Tokenizer;
}

const hex = (...parts: (string | number)[]) => sha256Hex(parts.join("\u001f"));

export async function handleChat(ctx: ChatContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readChatRequest(req, ctx.profile);
  const headerFaults = faultsOfHeader(req);
  const requestId = countRequest(ctx, body.model);
  const f = mergeFaults([...headerFaults, ...ctx.faults.next(body.model)]);
  const pace = new Pace(res);
  if (f.stallMs > 0) await pace.until(pace.t0 + f.stallMs);
  if (f.status) return sendFaultStatus(ctx.log, res, requestId, body.model, f.status);
  const answer = planAnswer(ctx, body, requestId);
  // The provider's bill: a 200 answer is billed whole, whatever happens to it on the way.
  if (!(f.error && body.stream !== true)) bill(ctx.stats, body.model, answer);
  logRequest(ctx.log, body, answer, f);
  const model = ctx.profile.models[body.model]!;
  const timing: AnswerTiming = {
    ttftAt: pace.t0 + f.stallMs + model.ttft_ms * ctx.scale,
    msPerToken: (1000 / model.tokens_per_s) * ctx.scale,
  };
  if (body.stream !== true) return sendWhole(res, answer, f, pace, timing);
  return sendStream(res, body, answer, f, pace, timing);
}

/** The body, parsed and checked: valid JSON, the schema, a model of the profile. */
async function readChatRequest(req: IncomingMessage, profile: SimProfile): Promise<ChatRequest> {
  let json: unknown;
  try {
    json = JSON.parse((await readBody(req)).toString("utf8"));
  } catch (err) {
    if (err instanceof HttpError) throw err;
    throw invalid("request body is not valid JSON", "invalid_json");
  }
  const parsed = chatRequestSchema.safeParse(json);
  if (!parsed.success) {
    const why = parsed.error.issues.map((i) => `${i.path.join(".") || "(body)"}: ${i.message}`).join("; ");
    throw invalid(why);
  }
  const body = parsed.data;
  if (!profile.models[body.model])
    throw new HttpError({
      status: 404,
      type: "invalid_request_error",
      code: "model_not_found",
      param: "model",
      message: `The model \`${body.model}\` does not exist or you do not have access to it.`,
    });
  return body;
}

/** The faults a request asks for in its `x-sim-fault` header (none without one). */
function faultsOfHeader(req: IncomingMessage): Fault[] {
  const header = req.headers[FAULT_HEADER];
  if (typeof header !== "string") return [];
  try {
    return parseFaultHeader(header);
  } catch (err) {
    if (err instanceof FaultHeaderError) throw invalid(`${FAULT_HEADER}: ${err.message}`, err.code);
    throw err;
  }
}

/** Counts the request in the stats and returns its id (from the seed and the server's counter). */
function countRequest(ctx: ChatContext, model: string): string {
  ctx.stats.requests++;
  ctx.stats.byModel[model] = (ctx.stats.byModel[model] ?? 0) + 1;
  return `req_${hex(ctx.seed, "request", ++ctx.served).slice(0, 24)}`;
}

/** Waits measured from the request's start, abandoned when the client goes away. */
class Pace {
  readonly t0 = performance.now();
  constructor(private readonly res: ServerResponse) {}

  async until(at: number): Promise<void> {
    const wait = at - performance.now();
    if (wait > 0) await sleep(wait, undefined, { signal: closedSignal(this.res) });
  }
}

function sendFaultStatus(
  log: Logger,
  res: ServerResponse,
  requestId: string,
  model: string,
  status: NonNullable<RequestFaults["status"]>,
): void {
  const e: ErrorShape =
    status.code === 429
      ? {
          status: 429,
          type: "requests",
          code: "rate_limit_exceeded",
          message: "Rate limit reached for requests. Please retry after a short wait.",
        }
      : {
          status: 503,
          type: "server_error",
          code: "service_unavailable",
          message: "The engine is currently overloaded, please try again later.",
        };
  log.debug({ request_id: requestId, model, status: e.status }, "engy_sim.fault_status");
  sendError(res, e, { "x-engy-request-id": requestId, "retry-after": String(status.retryAfterS) });
}

/** The turn the brain plans, cut to max_tokens, counted, as the completion to send. */
interface Answer {
  completion: Completion;
  plan: Plan;
  prompt: number;
  cached: number;
  completionTokens: number;
}

function planAnswer(ctx: ChatContext, body: ChatRequest, requestId: string): Answer {
  const { seed, profile, scenarios, cache, now, tokenizer: tk } = ctx;
  const messages = normaliseMessages(body);
  const plan = planTurn({
    seed,
    model: body.model,
    profile,
    scenarios,
    messages,
    toolNames: toolNamesOf(body),
  });
  const cut = applyMaxTokens(plan.content, plan.toolCalls, maxTokensOf(body), tk);
  const id = `chatcmpl-${hex(seed, body.model, JSON.stringify(body.messages), JSON.stringify(body.tools ?? null), maxTokensOf(body) ?? "").slice(0, 24)}`;
  const prompt = promptTokens(messages, body.tools ?? undefined, tk);
  const cached = profile.models[body.model]!.cache
    ? cache.lookupAndRecord(body.model, messages, body.tools ?? undefined, tk)
    : 0;
  const completionTokens = completionTokensOf(cut.content, cut.toolCalls, tk);
  const completion: Completion = {
    id,
    created: now(),
    model: body.model,
    requestId,
    content: cut.content,
    toolCalls: cut.toolCalls.map((tc, i) => ({ ...tc, id: `call_${hex(id, i).slice(0, 24)}` })),
    finishReason: cut.truncated ? "length" : cut.toolCalls.length > 0 ? "tool_calls" : "stop",
    usage: {
      prompt_tokens: prompt,
      completion_tokens: completionTokens,
      total_tokens: prompt + completionTokens,
      prompt_tokens_details: { cached_tokens: cached },
    },
  };
  return { completion, plan, prompt, cached, completionTokens };
}

function bill(stats: EngySimStats, model: string, a: Answer): void {
  let b = stats.billed[model];
  if (b === undefined) {
    b = { requests: 0, prompt_tokens: 0, cached_tokens: 0, completion_tokens: 0 };
    stats.billed[model] = b;
  }
  b.requests++;
  b.prompt_tokens += a.prompt;
  b.cached_tokens += a.cached;
  b.completion_tokens += a.completionTokens;
}

function logRequest(log: Logger, body: ChatRequest, a: Answer, f: RequestFaults): void {
  log.debug(
    {
      request_id: a.completion.requestId,
      model: body.model,
      step: a.plan.step,
      scenario: a.plan.scenario,
      malformed: a.plan.malformed,
      prompt_tokens: a.prompt,
      cached_tokens: a.cached,
      completion_tokens: a.completionTokens,
      finish_reason: a.completion.finishReason,
      stream: body.stream === true,
      faults: describe(f),
    },
    "engy_sim.request",
  );
}

/** The profile's speed: the first byte at `ttftAt`, then `msPerToken` per completion token. */
interface AnswerTiming {
  ttftAt: number;
  msPerToken: number;
}

/** A non-stream answer: a 500 for an `error` fault, else the body whole, cut in half or dripped. */
async function sendWhole(
  res: ServerResponse,
  a: Answer,
  f: RequestFaults,
  pace: Pace,
  { ttftAt, msPerToken }: AnswerTiming,
): Promise<void> {
  const idHeader = { "x-engy-request-id": a.completion.requestId };
  if (f.error) {
    await pace.until(ttftAt);
    sendError(
      res,
      {
        status: 500,
        type: "server_error",
        code: "engy_internal_error",
        message: "The server had an error while processing your request. Sorry about that!",
      },
      idHeader,
    );
    return;
  }
  const text = completionBody(a.completion, { usage: !f.noUsage });
  await pace.until(ttftAt + a.completionTokens * msPerToken);
  res.writeHead(200, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...idHeader,
  });
  if (f.cut) {
    const bytes = Buffer.from(text);
    cutAfter(res, bytes.subarray(0, Math.floor(bytes.length / 2)));
    return;
  }
  if (f.dripMs > 0) {
    const bytes = Buffer.from(text);
    const start = performance.now();
    for (let i = 0; i < bytes.length; i += 64) {
      if (i > 0) await pace.until(start + (i / 64) * f.dripMs);
      res.write(bytes.subarray(i, i + 64));
    }
    res.end();
    return;
  }
  res.end(text);
}

/** A stream answer: SSE events at the profile's speed, ended by [DONE], a cut or an error event. */
async function sendStream(
  res: ServerResponse,
  body: ChatRequest,
  a: Answer,
  f: RequestFaults,
  pace: Pace,
  { ttftAt, msPerToken }: AnswerTiming,
): Promise<void> {
  const includeUsage = body.stream_options?.include_usage === true && !f.noUsage;
  let events = streamEvents(a.completion, { usage: includeUsage, chunkChars: f.dripMs > 0 ? 4 : 32 });
  let ending: "done" | "cut" | "error" = "done";
  if (f.cut || f.error) {
    const after = (f.cut ?? f.error)!.afterChunks ?? Math.floor(events.length / 2);
    // A cut always lets at least the first chunk out: "headers, then nothing" is a stall, not a cut.
    events = events.slice(0, Math.min(Math.max(after, f.cut ? 1 : 0), events.length - 1));
    ending = f.cut ? "cut" : "error";
  }
  if (ending === "error") events.push(streamErrorEvent(a.completion.requestId));
  await pace.until(ttftAt);
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    connection: "keep-alive",
    "x-engy-request-id": a.completion.requestId,
  });
  const perEvent = events.length > 2 ? (a.completionTokens * msPerToken) / (events.length - 2) : 0;
  const gap = Math.max(perEvent, f.dripMs);
  if (gap === 0) {
    // Zero-latency mode: one write, the cheapest thing the server can do.
    if (ending === "cut") cutAfter(res, events.join(""));
    else res.end(events.join(""));
    return;
  }
  const start = performance.now();
  for (const [i, e] of events.entries()) {
    if (i > 0) await pace.until(start + i * gap);
    if (ending === "cut" && i === events.length - 1) cutAfter(res, e);
    else res.write(e);
  }
  if (ending !== "cut") res.end();
}

function describe(f: RequestFaults): string | undefined {
  const parts: string[] = [];
  if (f.stallMs) parts.push(`stall=${f.stallMs}`);
  if (f.dripMs) parts.push(`drip=${f.dripMs}`);
  if (f.cut) parts.push("cut");
  if (f.error) parts.push("error");
  if (f.noUsage) parts.push("no_usage");
  return parts.length ? parts.join(",") : undefined;
}
