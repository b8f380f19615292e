/**
 * @polkadot/* logs through @polkadot/util's `logger(origin)`, which writes straight to the console:
 * `console.error("2026-12-04 20:51:24", "          API-WS:", "disconnected from ws://…: 1006:: …")`.
 * In a process whose output is pino JSON lines those lines break the log (issue 26). This bridge
 * routes exactly those calls — a date, then a padded `ORIGIN:` — through pino as one JSON line
 * each (`chain.polkadot`, with the origin as a field and URLs masked); every other console call
 * passes through untouched. The chain client installs it with its logger.
 */
import { format } from "node:util";
import { type Logger, safeUrl } from "../log.js";

/** @polkadot/util formatDate: `CCYY-MM-DD HH:MM:SS`. */
const DATE = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;
/** @polkadot/util logger type: `${origin.toUpperCase()}:`.padStart(16). */
const ORIGIN = /^\s*([A-Z0-9][A-Z0-9/_.-]*):$/;
const URL_IN_TEXT = /\b(?:wss?|https?):\/\/[^\s'"),]+/g;

type Method = "log" | "warn" | "error";
const LEVEL: Record<Method, "info" | "warn"> = { log: "info", warn: "warn", error: "warn" };

let sink: Logger | undefined;
let installed = false;

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
  sink = log;
  if (installed) return;
  installed = true;
  for (const method of ["log", "warn", "error"] as const) {
    const original = console[method].bind(console);
    console[method] = (...args: unknown[]) => {
      const origin = sink ? polkadotOrigin(args) : undefined;
      if (!sink || origin === undefined) return original(...args);
      const text = format(...args.slice(2)).replace(URL_IN_TEXT, (u) => safeUrl(u));
      sink[LEVEL[method]]({ origin, text }, "chain.polkadot");
    };
  }
}
