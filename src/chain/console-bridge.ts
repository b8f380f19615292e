/**
 * @polkadot/* logs through @polkadot/util's `logger(origin)`, which writes straight to the console:
 * `console.error("2026-12-04 20:51:24", "          API-WS:", "disconnected from ws://…: 1006:: …")`.
 * In a process whose output is pino JSON lines those lines break the log (issue 26). This bridge
 * routes exactly those calls — a date, then a padded `ORIGIN:` — through pino as one JSON line
 * each (`chain.polkadot`, with the origin as a field and URLs masked; an origin's lines within a
 * minute of its last warning at debug level); every other console call passes through untouched. The chain client
 * installs it with its logger.
 */
import { format } from "node:util";
import { type Logger, safeUrl } from "../log.js";

/** @polkadot/util formatDate: `CCYY-MM-DD HH:MM:SS`. */
const DATE = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;
/** @polkadot/util logger type: `${origin.toUpperCase()}:`.padStart(16). */
const ORIGIN = /^\s*([A-Z0-9][A-Z0-9/_.-]*):$/;
const URL_IN_TEXT = /\b(?:wss?|https?):\/\/[^\s'"),]+/g;
/** Punctuation a message puts right after a URL (`disconnected from ws://h:9: 1006…`): not the URL's. */
const TRAILING = /[:.,;]+$/;

type Method = "log" | "warn" | "error";
const LEVEL: Record<Method, "info" | "warn"> = { log: "info", warn: "warn", error: "warn" };
/**
 * After a warning, the same origin's lines within this long are debug lines: a lost endpoint makes
 * API-WS say so every 2.5 s, and RPC-CORE once per request that fails with it.
 */
const REPEAT_MS = 60_000;

let sink: Logger | undefined;
let installed = false;
/** Per origin: when it last logged at its own level, and how many lines went to debug since. */
const recent = new Map<string, { at: number; repeats: number }>();

/** The URLs in a @polkadot line masked (credentials, query strings), the rest as written. */
export function maskUrls(text: string): string {
  return text.replace(URL_IN_TEXT, (u) => {
    const tail = TRAILING.exec(u)?.[0] ?? "";
    return safeUrl(u.slice(0, u.length - tail.length)) + tail;
  });
}

/** Log a line at its level, or at debug when its origin logged at its level within REPEAT_MS. */
function logThrottled(log: Logger, level: "info" | "warn", origin: string, text: string): void {
  const t = performance.now();
  const seen = recent.get(origin);
  if (seen && t - seen.at < REPEAT_MS) {
    seen.repeats++;
    log.debug({ origin, text }, "chain.polkadot");
    return;
  }
  recent.set(origin, { at: t, repeats: 0 });
  log[level]({ origin, text, ...(seen?.repeats ? { repeated: seen.repeats } : {}) }, "chain.polkadot");
}

/** Whether these console arguments are a @polkadot/util logger line; its origin if so. */
export function polkadotOrigin(args: readonly unknown[]): string | undefined {
  if (args.length < 2 || typeof args[0] !== "string" || typeof args[1] !== "string") return undefined;
  if (!DATE.test(args[0])) return undefined;
  return ORIGIN.exec(args[1])?.[1];
}

/**
 * Route @polkadot's console lines to `log` (the latest call wins; `undefined` lets them through to
 * the console again). The console methods are wrapped once per process.
 */
export function routePolkadotLogs(log: Logger | undefined): void {
  if (log !== sink) recent.clear();
  sink = log;
  if (installed) return;
  installed = true;
  for (const method of ["log", "warn", "error"] as const) {
    const original = console[method].bind(console);
    console[method] = (...args: unknown[]) => {
      const origin = sink ? polkadotOrigin(args) : undefined;
      if (!sink || origin === undefined) return original(...args);
      logThrottled(sink, LEVEL[method], origin, maskUrls(format(...args.slice(2))));
    };
  }
}
