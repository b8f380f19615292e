/**
 * Per-evaluation log archives for the platform (POST /api/validators/logs/upload, ≤ 10 MiB):
 * the evaluation's artifacts plus the daemon's own log lines written while it ran, as a .tar.gz;
 * each episode's policy.log and meter.json in upstream's shape (upstreamEpisodeFiles).
 * When everything does not fit, the biggest files are cut first (water-filling: every file keeps
 * min(size, c) bytes for the largest c that fits), keeping each cut file's tail, where failures
 * are written last. The plan is pure; reading files and gzip are the thin shell.
 */
import { lstat, open, readdir, readFile } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { gzipSync } from "node:zlib";
import { pyRound6 } from "../precision.js";
import { packTar } from "../sandbox/index.js";

// ---------------------------------------------------------------------------------------------
// Capturing the daemon's log lines (a pino destination next to stdout)
// ---------------------------------------------------------------------------------------------

export class LogRecording {
  private lines: string[] = [];
  private bytes = 0;
  /** Lines dropped from the start because the recording was over its cap. */
  dropped = 0;
  constructor(private readonly maxBytes: number) {}

  push(line: string): void {
    this.lines.push(line);
    this.bytes += Buffer.byteLength(line);
    while (this.bytes > this.maxBytes && this.lines.length > 1) {
      this.bytes -= Buffer.byteLength(this.lines.shift()!);
      this.dropped++;
    }
  }

  text(): string {
    const head = this.dropped > 0 ? `{"msg":"log.truncated","droppedLines":${this.dropped}}\n` : "";
    return head + this.lines.join("");
  }
}

/**
 * A pino destination (write(line)) that copies every line to the recordings in progress. Give it
 * to pino.multistream next to stdout; the daemon starts a recording per evaluation.
 */
export class LogTap {
  private readonly recordings = new Set<LogRecording>();

  write(chunk: string | Uint8Array): boolean {
    if (this.recordings.size === 0) return true;
    const line = typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    for (const r of this.recordings) r.push(line);
    return true;
  }

  start(maxBytes = 4 * 1024 * 1024): LogRecording {
    const r = new LogRecording(maxBytes);
    this.recordings.add(r);
    return r;
  }

  stop(r: LogRecording): string {
    this.recordings.delete(r);
    return r.text();
  }
}

// ---------------------------------------------------------------------------------------------
// The plan (pure)
// ---------------------------------------------------------------------------------------------

/** Bytes each file keeps so the total fits `budget`, cutting the biggest files first. */
export function planTruncation(sizes: readonly number[], budget: number): number[] {
  const total = sizes.reduce((a, b) => a + b, 0);
  if (total <= budget) return [...sizes];
  const order = sizes.map((_, i) => i).sort((a, b) => sizes[a]! - sizes[b]!);
  let remaining = Math.max(0, Math.floor(budget));
  const keep = new Array<number>(sizes.length).fill(0);
  for (let k = 0; k < order.length; k++) {
    const i = order[k]!;
    const left = order.length - k;
    const fair = Math.floor(remaining / left);
    if (sizes[i]! <= fair) {
      keep[i] = sizes[i]!;
      remaining -= sizes[i]!;
    } else {
      // Every file from here on is at least this big: they all keep the same share.
      for (let j = k; j < order.length; j++) keep[order[j]!] = fair;
      break;
    }
  }
  return keep;
}

/** tar's cost per entry beyond its data: a 512-byte header and padding to a 512-byte block. */
const TAR_ENTRY_OVERHEAD = 1024;
const TAR_END = 1024;

export interface ArchiveEntry {
  /** Relative path inside the archive. */
  name: string;
  data: Buffer;
}

export interface BuiltArchive {
  gz: Buffer;
  /** Files that were cut: name → original size. */
  truncated: Record<string, number>;
  files: number;
}

/**
 * Build a .tar.gz of `entries` no larger than `maxBytes`, cutting the biggest files first; the
 * `pinned` entries go in whole (their size comes off the budget first).
 */
export async function buildArchive(
  entries: readonly ArchiveEntry[],
  maxBytes: number,
  pinned: readonly ArchiveEntry[] = [],
): Promise<BuiltArchive> {
  // The uncompressed tar is kept under the limit, so the gzip (which can only grow incompressible
  // data by a few bytes per 32 KiB block) always fits; a second pass with a tighter budget covers it.
  const whole = pinned.reduce((n, e) => n + e.data.length + TAR_ENTRY_OVERHEAD, 0);
  let budget = Math.floor(maxBytes * 0.99) - whole - TAR_END - TAR_ENTRY_OVERHEAD * (entries.length + 1);
  for (let pass = 0; pass < 4; pass++) {
    const keep = planTruncation(
      entries.map((e) => e.data.length),
      Math.max(0, budget),
    );
    const truncated: Record<string, number> = {};
    const parts: ArchiveEntry[] = entries.map((e, i) => {
      const k = keep[i]!;
      if (k >= e.data.length) return e;
      truncated[e.name] = e.data.length;
      return { name: e.name, data: e.data.subarray(e.data.length - k) };
    });
    if (Object.keys(truncated).length > 0) {
      const note = Object.entries(truncated)
        .map(
          ([n, size]) =>
            `${n}: kept the last ${keep[entries.findIndex((e) => e.name === n)]} of ${size} bytes`,
        )
        .join("\n");
      parts.push({ name: "TRUNCATED.txt", data: Buffer.from(`${note}\n`) });
    }
    const gz = gzipSync(await packTar([...pinned, ...parts], { mtime: new Date() }));
    if (gz.length <= maxBytes) return { gz, truncated, files: pinned.length + parts.length };
    budget = Math.floor(budget / 2);
  }
  return { gz: gzipSync(await packTar([], { mtime: new Date() })), truncated: {}, files: 0 };
}

// ---------------------------------------------------------------------------------------------
// An episode's policy.log and meter.json as upstream uploads them (pure)
// ---------------------------------------------------------------------------------------------

/** upstream `_policy_log_tail(max_bytes=64 * 1024)`: a tail of each part, in characters. */
export const POLICY_LOG_TAIL_CHARS = 64 * 1024;
/** upstream: `sidecar.logs(tail=200)`. */
export const SIDECAR_LOG_LINES = 200;
/** upstream's meter keeps the first 2000 rows of an episode (`max_rows_per_episode`). */
export const METER_ROWS_MAX = 2000;
const CONTAINER_MARK = "--- stdout/stderr ---\n";

const tailChars = (s: string, n: number): string => {
  if (s.length <= n) return s;
  const cps = Array.from(s);
  return cps.length <= n ? s : cps.slice(cps.length - n).join("");
};

/**
 * An episode's policy.log as upstream's `_policy_log_tail` makes it: the last 64 KiB of the
 * policy's own /policy/policy.log, then `--- stdout/stderr ---` and the sidecar's last 200 log
 * lines (their last 64 KiB). Our artifact holds the policy log, the marker, and the container's
 * whole log (read up to a few MiB); one with no marker is the container's log alone (our built-in
 * sidecar logs to stdout).
 */
export function upstreamPolicyLog(text: string): string {
  const at = text.startsWith(CONTAINER_MARK) ? 0 : text.indexOf(`\n${CONTAINER_MARK}`);
  const file = at < 0 ? "" : text.slice(0, at);
  const container =
    at < 0 ? text : text.slice(at === 0 ? CONTAINER_MARK.length : at + 1 + CONTAINER_MARK.length);
  const lines = container.replace(/\n$/, "").split("\n");
  const lastLines = lines.slice(Math.max(0, lines.length - SIDECAR_LOG_LINES)).join("\n");
  const parts: string[] = [];
  if (file) parts.push(tailChars(file, POLICY_LOG_TAIL_CHARS));
  if (container.trim()) parts.push(`${CONTAINER_MARK}${tailChars(lastLines, POLICY_LOG_TAIL_CHARS)}`);
  return parts.join("\n");
}

/** Upstream's `round(x, 6)` (meter.py `EpisodeUsage.summary`); anything not a number passes as it is. */
const usd6 = (x: unknown) => (typeof x === "number" && Number.isFinite(x) ? pyRound6(x) : x);

/** Upstream's `EpisodeUsage.summary()` keys, in its order. */
const UPSTREAM_SUMMARY_KEYS = [
  "cost_usd",
  "calls",
  "errors",
  "refused_cap",
  "refused_model",
  "clamped",
  "overshoot_usd",
  "by_model",
  "tokens",
  "cap_usd",
] as const;

/**
 * An episode's meter.json as upstream uploads it (`episode.meter`: `usage.summary()` + `rows` +
 * `provenance`): the summary's keys at the top (`by_model` as USD per model), the rows (upstream's
 * field names, as src/meter writes them; the first 2000, as upstream's meter keeps them), and the
 * shadow provenance report from evaluation.json; our summary and the price table's hash ride along.
 * Our full receipts stay in the local artifact and the database. Null when the file is not what an
 * episode writes (it is then uploaded as it is).
 */
export function upstreamMeterJson(meter: unknown, evaluation: unknown): string | null {
  if (!meter || typeof meter !== "object" || Array.isArray(meter)) return null;
  const m = meter as Record<string, unknown>;
  const rows = Array.isArray(m.rows) ? m.rows : Array.isArray(m.receipts) ? m.receipts : null;
  if (rows === null) return null;
  const sum = (m.summary && typeof m.summary === "object" ? m.summary : null) as Record<
    string,
    unknown
  > | null;
  const ev = (evaluation && typeof evaluation === "object" ? evaluation : {}) as Record<string, unknown>;
  const head: Record<string, unknown> = {};
  if (sum)
    for (const k of UPSTREAM_SUMMARY_KEYS) {
      if (k === "by_model" && sum.by_model && typeof sum.by_model === "object") {
        const byModel: Record<string, unknown> = {};
        for (const [model, u] of Object.entries(sum.by_model as Record<string, unknown>).sort(([a], [b]) =>
          a < b ? -1 : a > b ? 1 : 0,
        ))
          byModel[model] = usd6(
            typeof u === "object" && u !== null ? (u as { cost_usd?: unknown }).cost_usd : u,
          );
        head.by_model = byModel;
      } else if (k in sum) head[k] = k === "cost_usd" || k === "overshoot_usd" ? usd6(sum[k]) : sum[k];
    }
  const kept = rows.slice(0, METER_ROWS_MAX);
  const out: Record<string, unknown> = {
    ...head,
    rows: kept,
    ...(rows.length > kept.length ? { rows_total: rows.length } : {}),
    provenance: ev.provenance ?? null,
    episode_id: m.episode_id ?? null,
    price_table_hash: m.price_table_hash ?? null,
    summary: sum,
  };
  return `${JSON.stringify(out, null, 2)}\n`;
}

/**
 * The upload's per-episode files as upstream uploads them: every `<dir>/policy.log` and
 * `<dir>/meter.json` among the entries rewritten (upstreamPolicyLog, upstreamMeterJson with the
 * same directory's evaluation.json); every other entry as it is.
 */
export function upstreamEpisodeFiles(entries: readonly ArchiveEntry[]): ArchiveEntry[] {
  const byName = new Map(entries.map((e) => [e.name, e]));
  const dirOf = (n: string) => n.slice(0, n.lastIndexOf("/") + 1);
  const json = (e: ArchiveEntry | undefined): unknown => {
    if (!e) return undefined;
    try {
      return JSON.parse(e.data.toString("utf8"));
    } catch {
      return undefined;
    }
  };
  return entries.map((e) => {
    const base = e.name.slice(e.name.lastIndexOf("/") + 1);
    if (base === "policy.log")
      return { name: e.name, data: Buffer.from(upstreamPolicyLog(e.data.toString("utf8"))) };
    if (base === "meter.json") {
      const shaped = upstreamMeterJson(json(e), json(byName.get(`${dirOf(e.name)}evaluation.json`)));
      return shaped === null ? e : { name: e.name, data: Buffer.from(shaped) };
    }
    return e;
  });
}

// ---------------------------------------------------------------------------------------------
// Reading an evaluation's artifacts
// ---------------------------------------------------------------------------------------------

/**
 * Regular files under `dir` (recursively, symlinks not followed), as archive entries under
 * `prefix/`. A missing dir is no artifacts. Reading is bounded: at most `maxFiles` files, the last
 * `perFileMax` bytes of each (more could never fit the archive anyway) and `totalMax` bytes in all;
 * what is left out is listed in `skipped`.
 */
export async function collectFiles(
  dir: string,
  prefix: string,
  limits: { maxFiles?: number; perFileMax?: number; totalMax?: number } = {},
): Promise<{ entries: ArchiveEntry[]; skipped: string[] }> {
  const maxFiles = limits.maxFiles ?? 2_000;
  const perFileMax = limits.perFileMax ?? 10 * 1024 * 1024;
  const totalMax = limits.totalMax ?? 64 * 1024 * 1024;
  const entries: ArchiveEntry[] = [];
  const skipped: string[] = [];
  let total = 0;
  const walk = async (d: string): Promise<void> => {
    let names: string[];
    try {
      names = (await readdir(d)).sort();
    } catch {
      return;
    }
    for (const n of names) {
      const p = join(d, n);
      const st = await lstat(p).catch(() => undefined);
      if (!st) continue;
      const name = `${prefix}/${relative(dir, p).split(sep).join("/")}`;
      if (st.isDirectory()) await walk(p);
      else if (st.isFile()) {
        const want = Math.min(st.size, perFileMax);
        if (entries.length >= maxFiles || total + want > totalMax) {
          skipped.push(name);
          continue;
        }
        const data = await readTail(p, st.size, want).catch(() => undefined);
        if (!data) continue;
        entries.push({ name, data });
        total += data.length;
      }
    }
  };
  await walk(dir);
  return { entries, skipped };
}

async function readTail(path: string, size: number, want: number): Promise<Buffer> {
  if (want >= size) return readFile(path);
  const fh = await open(path, "r");
  try {
    const buf = Buffer.alloc(want);
    const { bytesRead } = await fh.read(buf, 0, want, size - want);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}
