/** The fake platform's wire: its routes, its faults, its record of a request, and reading and answering HTTP. */
import type { IncomingMessage, ServerResponse } from "node:http";

export type FakeRoute =
  | "winner.current"
  | "epoch.current"
  | "epoch.score"
  | "epoch.scenario_progress"
  | "validators.heartbeat"
  | "logs.upload"
  | "logs.cycle"
  | "pack";

export type Fault =
  /** Answer with this status (and body) instead of handling the request. */
  | { kind: "status"; status: number; body?: string }
  /** Answer 200 (or `status`) with a body that is not what the docs describe. */
  | { kind: "malformed"; body: string; status?: number }
  /** Wait `ms` before answering; with `accept`, handle (and record) the request first, then wait. */
  | { kind: "hang"; ms: number; accept?: boolean }
  /** Drop the connection without an answer. */
  | { kind: "reset" };

export interface Received {
  route: FakeRoute | "unknown";
  method: string;
  path: string;
  query: Record<string, string>;
  /** Parsed JSON body, or the multipart fields (file parts as {name, type, size}). */
  body: unknown;
  status: number;
  /** The message the fake expected to be signed, and whether the signature matched it. */
  signature?: { message: string; valid: boolean };
  at: number;
  /** The request's User-Agent (null when it sent none). */
  userAgent?: string | null;
}

const MAX_BODY = 12 * 1024 * 1024;

export function routeOf(
  method: string,
  path: string,
): { name: FakeRoute; id?: number; token?: string } | null {
  if (method === "GET" && path === "/api/v2/winner/current") return { name: "winner.current" };
  if (method === "GET" && path === "/api/v2/epoch/current") return { name: "epoch.current" };
  if (method === "POST" && path === "/api/v2/validators/heartbeat") return { name: "validators.heartbeat" };
  if (method === "POST" && path === "/api/validators/logs/upload") return { name: "logs.upload" };
  if (method === "POST" && path === "/api/validators/logs/cycle") return { name: "logs.cycle" };
  let m = /^\/api\/v2\/epoch\/([^/]+)\/score$/.exec(path);
  if (method === "POST" && m) return { name: "epoch.score", id: /^\d+$/.test(m[1]!) ? Number(m[1]) : -1 };
  m = /^\/api\/v2\/epoch\/([^/]+)\/scenario_progress$/.exec(path);
  if (method === "POST" && m)
    return { name: "epoch.scenario_progress", id: /^\d+$/.test(m[1]!) ? Number(m[1]) : -1 };
  m = /^\/packs\/([0-9a-f]+)\.json$/.exec(path);
  if (method === "GET" && m) return { name: "pack", token: m[1]! };
  return null;
}

export async function readBody(req: IncomingMessage): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req) {
    n += (c as Buffer).length;
    if (n > MAX_BODY) return null;
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}

export function parseJsonObject(raw: Buffer): Record<string, unknown> | null {
  try {
    const v = JSON.parse(raw.toString("utf8")) as unknown;
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export function send(res: ServerResponse, status: number, json: unknown): void {
  if (res.destroyed) return;
  const body = Buffer.from(JSON.stringify(json));
  res.writeHead(status, { "content-type": "application/json", "content-length": body.length });
  res.end(body);
}
