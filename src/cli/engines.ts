/**
 * `trajrl-validator engines`: the engines episodes run on (ENGINES), their drain flags and, while
 * the daemon runs, their state; `engines drain NAME` / `engines resume NAME` set the flag the
 * daemon's pool reads every few seconds from the database (no new episodes there; running ones
 * finish). The flag outlives restarts.
 */
import type { Command } from "commander";
import { out } from "./io.js";

interface EnginesFlags {
  json?: boolean;
  url?: string;
}

async function context() {
  const { loadConfig } = await import("../config.js");
  const { openDb, KvRepo } = await import("../store/index.js");
  const config = loadConfig();
  const db = openDb(config.dbPath);
  return { config, db, kv: new KvRepo(db) };
}

async function knownEngine(name: string) {
  const { InputError } = await import("../errors.js");
  const ctx = await context();
  const names = ctx.config.evaluation.engines.list.map((e) => e.name);
  if (!names.includes(name)) {
    ctx.db.close();
    throw new InputError(
      "unknown_engine",
      `no engine named ${name} in ENGINES (engines: ${names.join(", ")})`,
    );
  }
  return ctx;
}

/** The daemon's view of its engines, when it answers (its /api/status). */
async function liveEngines(url: string): Promise<import("../status/index.js").EngineView[] | undefined> {
  try {
    const res = await fetch(`${url.replace(/\/+$/, "")}/api/status`, { signal: AbortSignal.timeout(2_000) });
    if (res.status !== 200) return undefined;
    const body = (await res.json()) as { schema?: unknown; engines?: unknown };
    return body.schema === 1 && Array.isArray(body.engines)
      ? (body.engines as import("../status/index.js").EngineView[])
      : undefined;
  } catch {
    return undefined;
  }
}

export function registerEngines(program: Command): void {
  const engines = program
    .command("engines")
    .description(
      "the Docker engines episodes run on (ENGINES): drain flags and, from the daemon, their state",
    )
    .option("--json", "print as JSON")
    .option("--url <url>", "status server of the daemon (default http://STATUS_HOST:STATUS_PORT)")
    .action(async (flags: EnginesFlags) => {
      const { config, db, kv } = await context();
      try {
        const { readDrained } = await import("../pool/index.js");
        const drained = readDrained(kv);
        const host =
          config.status.host === "0.0.0.0" || config.status.host === "::" ? "127.0.0.1" : config.status.host;
        const live = await liveEngines(flags.url ?? `http://${host}:${config.status.port}`);
        const { safeUrl } = await import("../log.js");
        const rows = config.evaluation.engines.list.map((e, k) => ({
          name: e.name,
          url: safeUrl(e.url),
          slots: e.slots ?? null,
          builds: k === 0,
          drained: e.name in drained ? drained[e.name]!.at : null,
          live: live?.find((v) => v.name === e.name) ?? null,
        }));
        if (flags.json) {
          out(JSON.stringify({ explicit: config.evaluation.engines.explicit, engines: rows }, null, 2));
          return;
        }
        if (live) {
          const { engineTable } = await import("../web/index.js");
          for (const line of engineTable(live, Date.now())) out(line);
        } else {
          out("the daemon is not answering: configured engines and their flags");
          for (const r of rows)
            out(
              `  ${r.name}${r.builds ? " (builds)" : ""}  ${r.url}  slots ${r.slots ?? "= concurrency"}${r.drained ? `  DRAINED since ${r.drained}` : ""}`,
            );
        }
        if (!config.evaluation.engines.explicit)
          out("ENGINES is not set: this host's engine alone (README, Several hosts)");
      } finally {
        db.close();
      }
    });

  engines
    .command("drain <name>")
    .description("no new episodes on this engine; the running ones finish (kept until `engines resume`)")
    .action(async (name: string) => {
      const { db, kv } = await knownEngine(name);
      try {
        const { setDrained } = await import("../pool/index.js");
        setDrained(kv, name, true);
        out(
          `engine ${name} drained: no new episodes there; running ones finish (the daemon reads this within seconds)`,
        );
      } finally {
        db.close();
      }
    });

  engines
    .command("resume <name>")
    .description("place episodes on this engine again")
    .action(async (name: string) => {
      const { db, kv } = await knownEngine(name);
      try {
        const { setDrained } = await import("../pool/index.js");
        setDrained(kv, name, false);
        out(`engine ${name} resumed: it takes episodes again`);
      } finally {
        db.close();
      }
    });
}
