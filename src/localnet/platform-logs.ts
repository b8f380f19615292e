/**
 * The fake platform's log uploads (`/api/validators/logs/upload` and `/logs/cycle`): a multipart
 * form with the documented fields, signed, and a gzip archive within the 10 MB limit.
 */
import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { logsMessage } from "../platform/index.js";
import { type AuthPolicy, authenticate } from "./platform-auth.js";
import type { Received } from "./platform-routes.js";

const LOG_LIMIT = 10 * 1024 * 1024;

/** A log upload the fake accepted. */
export interface ReceivedLog {
  route: "logs.upload" | "logs.cycle";
  fields: Record<string, string>;
  archive: Buffer;
}

export async function logUpload(
  name: "logs.upload" | "logs.cycle",
  req: IncomingMessage,
  raw: Buffer,
  rec: Received,
  policy: AuthPolicy,
  logs: ReceivedLog[],
): Promise<{ status: number; json: unknown }> {
  const ct = req.headers["content-type"] ?? "";
  if (!ct.startsWith("multipart/form-data")) {
    return { status: 400, json: { success: false, error: "multipart/form-data required" } };
  }
  let form: FormData;
  try {
    form = await new Response(raw, { headers: { "content-type": ct } }).formData();
  } catch {
    return { status: 400, json: { success: false, error: "invalid multipart body" } };
  }
  const fields: Record<string, string> = {};
  let archive: Buffer | undefined;
  const shown: Record<string, unknown> = {};
  for (const [k, v] of form.entries()) {
    if (typeof v === "string") {
      fields[k] = v;
      shown[k] = v;
    } else {
      archive = Buffer.from(await v.arrayBuffer());
      shown[k] = { name: v.name, type: v.type, size: archive.length };
    }
  }
  rec.body = shown;
  const required =
    name === "logs.upload"
      ? [
          "validator_hotkey",
          "eval_id",
          "miner_hotkey",
          "miner_uid",
          "block_height",
          "pack_hash",
          "timestamp",
          "signature",
        ]
      : ["validator_hotkey", "eval_id", "block_height", "timestamp", "signature"];
  const missing = required.filter((k) => !fields[k]);
  if (missing.length)
    return { status: 400, json: { success: false, error: `missing fields: ${missing.join(", ")}` } };
  const denied = authenticate(
    policy,
    fields.validator_hotkey,
    fields.timestamp,
    fields.signature,
    logsMessage,
    rec,
  );
  if (denied) return { status: denied.status, json: { success: false, error: denied.error } };
  if (!archive) return { status: 400, json: { success: false, error: "log_archive is required" } };
  if (archive.length > LOG_LIMIT)
    return { status: 400, json: { success: false, error: "log_archive exceeds 10MB limit" } };
  if (archive[0] !== 0x1f || archive[1] !== 0x8b) {
    return { status: 400, json: { success: false, error: "log_archive must be a valid .tar.gz file" } };
  }
  logs.push({ route: name, fields, archive });
  return {
    status: 200,
    json: { success: true, log_id: randomBytes(6).toString("hex"), size_bytes: archive.length },
  };
}
