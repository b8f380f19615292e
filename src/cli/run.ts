/**
 * `trajrl-validator run`: the long-running validator (src/daemon). Configuration from the
 * environment; pino JSON logs on stdout (with epoch, pack, evaluation and episode ids). A start the
 * daemon refuses is held (src/daemon/hold.ts): the process stays up, its status page says why, and it
 * tries again; settings that do not parse are one JSON line (`daemon.start_failed`, exit 1): every
 * line a log pipeline reads is JSON. SIGTERM or SIGINT stops it gracefully (exit 0); a second signal exits at once.
 */
import type { Command } from "commander";
import type { Config } from "../config.js";
import type { Daemon, LogTap } from "../daemon/index.js";
import { toValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import type { LiveStatus } from "../status/index.js";
import type { Db, NetworkId } from "../store/index.js";

export function registerRun(program: Command): void {
  program
    .command("run")
    .description(
      "run the validator: challenge epochs, evaluations, verdicts, weights (config from the environment)",
    )
    .option("--no-status", "do not start the status web server")
    .action(async (opts: { status: boolean }) => {
      process.exitCode = await runValidator({ status: opts.status });
    });
}

async function runValidator(opts: { status: boolean }): Promise<number> {
  const [{ loadConfig }, { Daemon, LogTap, startOrHold }, { LiveStatus }] = await Promise.all([
    import("../config.js"),
    import("../daemon/index.js"),
    import("../status/index.js"),
  ]);
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    return startFailed(await fatalLog(), err);
  }
  // Every line goes to stdout and to the tap, which copies the lines of each evaluation into its log archive.
  const tap = new LogTap();
  const { log, flush } = await validatorLog(config, tap);
  const live = new LiveStatus();
  const page = new StatusPage(opts.status, { live, config, log });
  const stopping = new AbortController();
  let current: Daemon | undefined;
  onSignals(log, flush, () => {
    stopping.abort();
    void current?.stop();
  });
  await onStrayErrors(log, live);

  const daemon = await startOrHold({
    makeDaemon: () => {
      current = new Daemon({ config, log, live, logTap: tap });
      return current;
    },
    live,
    log,
    signal: stopping.signal,
    onHold: () => page.showHeld(),
  });
  if (daemon) {
    await page.show(daemon.database, daemon.network);
    await daemon.done;
  }
  await page.close();
  log.info("daemon.exit");
  flush();
  // Keep-alive sockets must not hold an exit the operator asked for.
  setTimeout(() => process.exit(0), 3_000).unref();
  return 0;
}

async function validatorLog(config: Config, tap: LogTap) {
  const [{ default: pino }, { createLogger }] = await Promise.all([import("pino"), import("../log.js")]);
  const stdout = pino.destination({ dest: 1, sync: false });
  const log = createLogger({
    level: config.logLevel,
    destination: pino.multistream([
      { stream: stdout, level: "trace" },
      { stream: tap, level: "trace" },
    ]),
  });
  const flush = () => {
    try {
      stdout.flushSync();
    } catch {
      // stdout closed (a broken pipe): nothing left to flush to
    }
  };
  return { log, flush };
}

function onSignals(log: Logger, flush: () => void, stop: () => void): void {
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      log.warn({ signal }, "daemon.forced_exit");
      flush();
      process.exit(signal === "SIGINT" ? 130 : 143);
    }
    log.info({ signal }, "daemon.signal");
    stop();
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
}

/** The loops catch their own failures; anything that still escapes is logged and counted, never fatal. */
async function onStrayErrors(log: Logger, live: LiveStatus): Promise<void> {
  const { ALARM } = await import("../daemon/index.js");
  const onStray = (kind: string) => (err: unknown) => {
    log.error({ err }, `daemon.${kind}`);
    live.raise(ALARM.uncaughtError, `${kind}: ${(err as Error)?.message ?? String(err)}`, "error");
  };
  process.on("unhandledRejection", onStray("unhandled_rejection"));
  process.on("uncaughtException", onStray("uncaught_exception"));
}

/**
 * The status server: while the start is held, one over an empty database that shows why (no
 * network's rows: the daemon has not opened its own); once the daemon runs, its own database and
 * network. The validator's job never depends on it: a server that cannot listen is logged.
 */
class StatusPage {
  private server: { url: string; close(): Promise<void> } | undefined;
  private held = false;
  private heldDb: Db | undefined;

  constructor(
    private readonly enabled: boolean,
    private readonly o: { live: LiveStatus; config: Config; log: Logger },
  ) {}

  async showHeld(): Promise<void> {
    if (this.held || !this.enabled) return;
    this.held = true;
    const { openDb } = await import("../store/index.js");
    this.heldDb = openDb(":memory:");
    await this.listen(this.heldDb, null);
  }

  async show(db: Db | undefined, network: NetworkId | undefined): Promise<void> {
    if (!this.enabled || !db) return;
    await this.close();
    await this.listen(db, network ?? null);
  }

  private async listen(db: Db, network: NetworkId | null): Promise<void> {
    try {
      const { startStatusServer } = await import("../web/index.js");
      this.server = await startStatusServer({ ...this.o, db, network });
      this.o.log.info({ url: this.server.url, held: network === null }, "daemon.status_server");
    } catch (err) {
      this.o.log.error({ err }, "daemon.status_server_failed");
    }
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    await s?.close().catch(() => {});
    this.heldDb?.close();
    this.heldDb = undefined;
  }
}

/** A logger for the one line before the real one exists (the settings did not parse). */
async function fatalLog(): Promise<Logger> {
  const [{ default: pino }, { createLogger }] = await Promise.all([import("pino"), import("../log.js")]);
  return createLogger({ destination: pino.destination({ dest: 1, sync: true }) });
}

/**
 * Settings the daemon cannot even read (an invalid value), as one JSON line on the log stream with its
 * code and the fix: never a stack trace, never plain text. The image's entrypoint holds an invalid
 * .env.validator before this runs.
 */
function startFailed(log: Logger, err: unknown): number {
  const e = toValidatorError(err);
  log.fatal({ code: e.code, err: e.message }, "daemon.start_failed");
  return 1;
}
