/**
 * `trajrl-validator run`: the long-running validator (src/daemon). Configuration from the
 * environment; pino JSON logs on stdout (with epoch, pack, evaluation and episode ids). SIGTERM or
 * SIGINT stops it gracefully (exit 0); a second signal exits at once.
 */
import type { Command } from "commander";

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
  const [{ default: pino }, { loadConfig }, { createLogger }, { Daemon, LogTap, ALARM }, { LiveStatus }] =
    await Promise.all([
      import("pino"),
      import("../config.js"),
      import("../log.js"),
      import("../daemon/index.js"),
      import("../status/index.js"),
    ]);
  const config = loadConfig();
  // Every line goes to stdout and to the tap, which copies the lines of each evaluation into its log archive.
  const tap = new LogTap();
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
  const live = new LiveStatus();
  const daemon = new Daemon({ config, log, live, logTap: tap });

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      log.warn({ signal }, "daemon.forced_exit");
      flush();
      process.exit(signal === "SIGINT" ? 130 : 143);
    }
    log.info({ signal }, "daemon.signal");
    void daemon.stop();
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  // The loops catch their own failures; anything that still escapes is logged and counted, never fatal.
  const onStray = (kind: string) => (err: unknown) => {
    log.error({ err }, `daemon.${kind}`);
    live.raise(ALARM.uncaughtError, `${kind}: ${(err as Error)?.message ?? String(err)}`, "error");
  };
  process.on("unhandledRejection", onStray("unhandled_rejection"));
  process.on("uncaughtException", onStray("uncaught_exception"));

  try {
    await daemon.start();
  } catch (err) {
    flush();
    throw err;
  }

  let status: { url: string; close(): Promise<void> } | undefined;
  const db = daemon.database;
  if (opts.status && db) {
    try {
      const { startStatusServer } = await import("../web/index.js");
      status = await startStatusServer({ live, db, network: daemon.network ?? null, config, log });
      log.info({ url: status.url }, "daemon.status_server");
    } catch (err) {
      // The validator's job does not depend on its status page.
      log.error({ err }, "daemon.status_server_failed");
    }
  }

  await daemon.done;
  await status?.close().catch(() => {});
  log.info("daemon.exit");
  flush();
  // Keep-alive sockets must not hold an exit the operator asked for.
  setTimeout(() => process.exit(0), 3_000).unref();
  return 0;
}
