import pino, { type DestinationStream, type Logger, type LoggerOptions } from "pino";

export type { Logger } from "pino";

/**
 * Secrets never reach a log line, at any depth: a key naming a secret (config objects, HTTP headers,
 * episode tokens, wallet material, signatures, pack URLs, which are secret until the epoch reveals
 * them and may carry signed query strings) has its value replaced, in the logged object and in child
 * bindings, however deep it sits; a `Bearer …` credential inside any string is cut out too.
 */
const SECRET_KEYS = new Set([
  "apikey",
  "llmapikey",
  "xapikey",
  "token",
  "episodetoken",
  "authorization",
  "proxyauthorization",
  "cookie",
  "setcookie",
  "secret",
  "secretseed",
  "secretphrase",
  "privatekey",
  "mnemonic",
  "password",
  "passphrase",
  "packurl",
  "challengerpackurl",
  "signature",
]);
/** Suffixes that mark a secret whatever the prefix (`accessToken`, `upstream_api_key`, `db_password`). */
const SECRET_SUFFIXES = ["token", "apikey", "secret", "password", "privatekey", "packurl"];
const CENSOR = "[redacted]";
const MAX_DEPTH = 32;

export function isSecretKey(key: string): boolean {
  const k = key.toLowerCase().replace(/[^a-z0-9]/g, "");
  return SECRET_KEYS.has(k) || SECRET_SUFFIXES.some((s) => k.endsWith(s));
}

const BEARER = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/g;

/** A copy of `value` with every secret key's value censored, at any depth (cycles cut). */
export function redactDeep(value: unknown, depth = 0, seen = new WeakSet<object>()): unknown {
  if (typeof value === "string")
    return value.includes("Bearer") || value.includes("Basic")
      ? value.replace(BEARER, `$1 ${CENSOR}`)
      : value;
  if (value === null || typeof value !== "object") return value;
  if (seen.has(value)) return "[Circular]";
  if (depth >= MAX_DEPTH) return "[too deep]";
  if (value instanceof Error) {
    // A censored twin of the same class, so pino's err serializer still names its type.
    seen.add(value);
    const twin = Object.create(Object.getPrototypeOf(value)) as Error;
    for (const k of Object.getOwnPropertyNames(value)) {
      const d = Object.getOwnPropertyDescriptor(value, k)!;
      if ("value" in d) d.value = isSecretKey(k) ? CENSOR : redactDeep(d.value, depth + 1, seen);
      Object.defineProperty(twin, k, d);
    }
    seen.delete(value);
    return twin;
  }
  if (Buffer.isBuffer(value) || value instanceof Date || ArrayBuffer.isView(value)) return value;
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") return redactDeep(toJSON.call(value), depth + 1, seen);
  seen.add(value);
  try {
    if (Array.isArray(value)) return value.map((v) => redactDeep(v, depth + 1, seen));
    if (value instanceof Map)
      return Object.fromEntries(
        [...value].map(([k, v]) => [
          String(k),
          isSecretKey(String(k)) ? CENSOR : redactDeep(v, depth + 1, seen),
        ]),
      );
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      out[k] = isSecretKey(k) && v != null ? CENSOR : redactDeep(v, depth + 1, seen);
    return out;
  } finally {
    seen.delete(value);
  }
}

export interface LogOptions {
  level?: string;
  name?: string;
  destination?: DestinationStream;
}

export function createLogger(opts: LogOptions = {}): Logger {
  const options: LoggerOptions = {
    level: opts.level ?? "info",
    base: { svc: opts.name ?? "trajrl-validator" },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: {
      level: (label) => ({ level: label }),
      // pino's `redact` paths stop at the depth they spell out; these run on every line and binding.
      log: (obj) => redactDeep(obj) as Record<string, unknown>,
      bindings: (bindings) => redactDeep(bindings) as Record<string, unknown>,
    },
  };
  const logger = pino(options, opts.destination ?? pino.destination({ dest: 1, sync: false }));
  // pino applies `formatters.bindings` to the root only; children (and theirs, which inherit this
  // method) get their bindings censored here.
  const child = logger.child as unknown as (
    this: Logger,
    b: pino.Bindings,
    o?: pino.ChildLoggerOptions,
  ) => Logger;
  const rootKeys = new Set(Object.keys(logger.bindings()));
  logger.child = function (this: Logger, bindings: pino.Bindings, childOptions?: pino.ChildLoggerOptions) {
    const own = redactDeep(bindings) as pino.Bindings;
    const bound = this.bindings();
    if (!Object.keys(own).some((k) => k in bound)) return child.call(this, own, childOptions);
    // pino appends a child's bindings to its parent's: a key bound again would be written twice on
    // every line (`"component":"pool",…,"component":"sandbox"`), and a reader keeps one of the two.
    // Rebuilt from the root instead, each key once, the innermost value winning.
    const merged: pino.Bindings = {};
    for (const [k, v] of Object.entries(bound)) if (!rootKeys.has(k)) merged[k] = v;
    const c = child.call(logger, { ...merged, ...own }, childOptions);
    if (childOptions?.level === undefined) c.level = this.level;
    return c;
  } as unknown as typeof logger.child;
  return logger;
}

/** A logger that drops everything: for library callers and tests that do not care. */
export const silentLogger: Logger = pino({ level: "silent" });

/**
 * Mask a URL's credentials and query string for logs (pack URLs may be pre-signed); a URL with
 * neither is returned as written.
 */
export function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    if (!u.username && !u.password && !u.search) return url;
    u.username = "";
    u.password = "";
    const q = u.search ? "?[redacted]" : "";
    u.search = "";
    return `${u.toString()}${q}`;
  } catch {
    return "[unparseable-url]";
  }
}
