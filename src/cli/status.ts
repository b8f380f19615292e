/**
 * `trajrl-validator status`: the status page's summary in the terminal. Asks the running daemon
 * (/api/status); when nothing answers, reads the SQLite file directly (recent verdicts, weights,
 * outbox) and says so. Exit code: 0 daemon healthy, 1 daemon unhealthy or degraded (chain or platform
 * unreachable past DEGRADED_AFTER_S), 2 daemon not answering.
 */
import type { Command } from "commander";
import { out, warn } from "./io.js";

export const STATUS_EXIT = { healthy: 0, unhealthy: 1, noDaemon: 2 } as const;

export function registerStatus(program: Command): void {
  program
    .command("status")
    .description(
      "summary of the running validator (daemon's /api/status; falls back to the database). Exit 0 healthy, 1 unhealthy or degraded, 2 daemon not answering",
    )
    .option("--url <url>", "status server of the daemon (default http://STATUS_HOST:STATUS_PORT)")
    .option("--json", "print the status snapshot as JSON (the /api/status document)")
    .option("--timeout <ms>", "how long to wait for the daemon", "3000")
    .action(async (opts: { url?: string; json?: boolean; timeout: string }) => {
      // Heavy modules load here, not at registration: `--help` stays fast.
      const { loadConfig } = await import("../config.js");
      const { InputError } = await import("../errors.js");
      const config = loadConfig();
      const timeoutMs = Number(opts.timeout);
      if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
        throw new InputError("bad_flag", `--timeout: not a positive number: ${opts.timeout}`);
      const host =
        config.status.host === "0.0.0.0" || config.status.host === "::" ? "127.0.0.1" : config.status.host;
      const base = (
        opts.url ?? `http://${host.includes(":") ? `[${host}]` : host}:${config.status.port}`
      ).replace(/\/+$/, "");
      try {
        new URL(base);
      } catch {
        throw new InputError("bad_flag", `--url: not a URL: ${base}`);
      }

      const fromDaemon = await fetchStatus(`${base}/api/status`, timeoutMs);
      const { renderText } = await import("../web/index.js");
      if (fromDaemon.ok) {
        const s = fromDaemon.snapshot;
        if (opts.json) out(JSON.stringify(s, null, 2));
        else process.stdout.write(renderText(s, { note: `(live, from the daemon at ${base})` }));
        // A daemon of an older version reports no state: fall back to its liveness flag.
        const state = s.health?.state ?? (s.health && !s.health.ok ? "unhealthy" : "healthy");
        process.exitCode = state === "healthy" ? STATUS_EXIT.healthy : STATUS_EXIT.unhealthy;
        return;
      }

      process.exitCode = STATUS_EXIT.noDaemon;
      const held = await heldBack();
      if (held && !opts.json) process.stdout.write(`HELD BACK    ${held}\n`);
      await fromDatabase(config, `${base} (${fromDaemon.error})`, { json: opts.json === true, held });
    });
}

/**
 * The image's entrypoint holds the daemon back while the host's set-up needs a fix (a wallet it
 * cannot read): then nothing answers, and that reason is the first thing to say.
 */
async function heldBack(): Promise<string | undefined> {
  const { setupError } = await import("../web/index.js");
  const why = setupError();
  return why ? `the validator waits for a set-up fix: ${why}` : undefined;
}

/** No daemon answers: the database's rows of the network the last daemon ran on, without live data. */
async function fromDatabase(
  config: import("../config.js").Config,
  where: string,
  opts: { json: boolean; held: string | undefined },
): Promise<void> {
  const { existsSync } = await import("node:fs");
  const { InputError, InfraError } = await import("../errors.js");
  if (!existsSync(config.dbPath)) {
    // Held back before the first start: the reason is the whole story.
    if (opts.held) {
      if (opts.json) out(JSON.stringify({ heldBack: opts.held }, null, 2));
      return;
    }
    throw new InputError(
      "no_status",
      `the daemon is not answering at ${where} and there is no database at ${config.dbPath} (DATA_DIR)`,
    );
  }
  const { lastNetwork, openDb } = await import("../store/index.js");
  const { StatusReader, renderText } = await import("../web/index.js");
  const db = openDb(config.dbPath, { readonly: true });
  try {
    let snapshot: import("../web/index.js").StatusSnapshot;
    let note = `the daemon is not answering at ${where}; read from ${config.dbPath}, without live data`;
    try {
      const last = lastNetwork(db);
      if (last)
        note += `; the rows of ${last.name} (genesis ${last.network.slice(0, 10)}…), where the daemon last ran`;
      snapshot = new StatusReader(db, last?.network ?? null).snapshot({ config, live: null });
    } catch (err) {
      throw new InfraError(
        "status_db_unreadable",
        `cannot read ${config.dbPath}: ${(err as Error).message} (is the database from an older version? start the validator once to migrate it)`,
        { cause: err, retryable: false },
      );
    }
    if (opts.json)
      out(JSON.stringify({ ...snapshot, note, ...(opts.held ? { heldBack: opts.held } : {}) }, null, 2));
    else {
      warn(`note: ${note}`);
      process.stdout.write(renderText(snapshot));
    }
  } finally {
    db.close();
  }
}

type Fetched =
  | { ok: true; snapshot: import("../web/index.js").StatusSnapshot }
  | { ok: false; error: string };

async function fetchStatus(url: string, timeoutMs: number): Promise<Fetched> {
  try {
    const res = await fetch(url, {
      signal: AbortSignal.timeout(timeoutMs),
      headers: { accept: "application/json" },
    });
    if (res.status !== 200) return { ok: false, error: `HTTP ${res.status}` };
    const body = (await res.json().catch(() => undefined)) as unknown;
    // Checked at the boundary: something else on that port must not be printed as our status.
    const { z } = await import("zod");
    const shape = z
      .object({ schema: z.literal(1), version: z.string(), now: z.number(), verdicts: z.array(z.unknown()) })
      .passthrough();
    const parsed = shape.safeParse(body);
    if (!parsed.success) return { ok: false, error: "the answer is not a trajrl-validator status document" };
    return { ok: true, snapshot: parsed.data as unknown as import("../web/index.js").StatusSnapshot };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    const why = e.name === "TimeoutError" ? `no answer within ${timeoutMs}ms` : (e.cause?.code ?? e.message);
    return { ok: false, error: why };
  }
}
