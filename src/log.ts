import pino, { type DestinationStream, type Logger, type LoggerOptions } from "pino";

export type { Logger } from "pino";

/**
 * Secrets never reach a log line. Paths cover the shapes we log: config objects, HTTP
 * headers, episode tokens, wallet material and pack URLs (which can carry signed query strings).
 */
export const REDACT_PATHS = [
  "apiKey",
  "*.apiKey",
  "*.*.apiKey",
  "llmApiKey",
  "*.llmApiKey",
  "token",
  "*.token",
  "episodeToken",
  "*.episodeToken",
  "authorization",
  "*.authorization",
  "headers.authorization",
  "*.headers.authorization",
  'headers["x-api-key"]',
  "secret",
  "*.secret",
  "secretSeed",
  "*.secretSeed",
  "secretPhrase",
  "*.secretPhrase",
  "privateKey",
  "*.privateKey",
  "mnemonic",
  "*.mnemonic",
  "password",
  "*.password",
  "packUrl",
  "*.packUrl",
  "pack_url",
  "*.pack_url",
  "signature",
  "*.signature",
];

export interface LogOptions {
  level?: string;
  name?: string;
  destination?: DestinationStream;
}

export function createLogger(opts: LogOptions = {}): Logger {
  const options: LoggerOptions = {
    level: opts.level ?? "info",
    base: { svc: opts.name ?? "trajrl-validator" },
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  };
  return pino(options, opts.destination ?? pino.destination({ dest: 1, sync: false }));
}

/** A logger that drops everything: for library callers and tests that do not care. */
export const silentLogger: Logger = pino({ level: "silent" });

/** Mask a URL's credentials and query string for logs (pack URLs may be pre-signed). */
export function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = "";
    u.password = "";
    const q = u.search ? "?[redacted]" : "";
    u.search = "";
    return `${u.toString()}${q}`;
  } catch {
    return "[unparseable-url]";
  }
}
