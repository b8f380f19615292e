import type { Command } from "commander";
import { InputError } from "../errors.js";
import { numberFlag } from "./flags.js";
import { out } from "./io.js";

interface MeterFlags {
  upstream: string;
  cap: string;
  port: string;
  host?: string;
  apiKeyEnv?: string;
  episode?: string;
  allowlist?: string;
  prices?: string;
}

export function registerMeter(program: Command): void {
  program
    .command("meter")
    .description(
      "serve the meter standalone with one minted episode; prints its token as the first line (then the base URL)",
    )
    .requiredOption("--upstream <url>", "OpenAI-compatible provider base URL, e.g. https://api.engy.ai/v1")
    .requiredOption("--cap <usd>", "the episode's cap in USD")
    .option("--port <port>", "port (0 = any free port)", "8790")
    .option("--host <host>", "listen address (default METER_HOST)")
    .option("--api-key-env <name>", "environment variable holding the provider key (default LLM_API_KEY)")
    .option("--episode <id>", "episode id the receipts are filed under (default standalone-<time>)")
    .option("--allowlist <file>", "allowlist JSON (default: the repo's allowlist.json)")
    .option("--prices <file>", "price table JSON (default: the repo's price-table.json)")
    .action(async (flags: MeterFlags) => {
      const cap = numberFlag("cap", flags.cap, 0, 1000, false);
      const port = numberFlag("port", flags.port, 0, 65535, true);
      try {
        new URL(flags.upstream);
      } catch {
        throw new InputError("invalid_flag", `--upstream ${flags.upstream}: not a URL`);
      }
      const [{ loadConfig, namedEnv }, { createLogger }, meterMod, store, pino] = await Promise.all([
        import("../config.js"),
        import("../log.js"),
        import("../meter/index.js"),
        import("../store/index.js"),
        import("pino"),
      ]);
      const config = loadConfig();
      let apiKey = config.llm.apiKey;
      if (flags.apiKeyEnv !== undefined) {
        apiKey = namedEnv(flags.apiKeyEnv);
        if (apiKey === undefined)
          throw new InputError(
            "missing_api_key",
            `--api-key-env ${flags.apiKeyEnv}: the variable is not set`,
          );
      }
      // stdout carries the token (first line) for whoever started us; logs go to stderr.
      const log = createLogger({
        level: config.logLevel,
        name: "meter",
        destination: pino.default.destination({ dest: 2, sync: false }),
      });
      const db = store.openDb(config.dbPath, { log });
      const meter = new meterMod.Meter({
        upstreamUrl: flags.upstream.replace(/\/+$/, ""),
        apiKey,
        allowlist: meterMod.loadAllowlist(flags.allowlist),
        prices: meterMod.loadPriceTable(flags.prices),
        receipts: new store.ReceiptRepo(db),
        log,
        upstreamTimeoutMs: config.llm.upstreamTimeoutMs,
      });
      const episodeId = flags.episode ?? `standalone-${new Date().toISOString().replace(/[:.]/g, "-")}`;
      let listener: Awaited<ReturnType<typeof meter.listen>>;
      try {
        // A port another process holds: an ephemeral one instead (as upstream's meter does); the
        // URL printed on the second line is the one that serves.
        listener = await meter.listen(flags.host ?? config.meter.host, port, undefined, {
          fallbackToEphemeral: true,
        });
      } catch (err) {
        await meter.stop();
        db.close();
        throw new InputError(
          "listen_failed",
          `cannot listen on ${flags.host ?? config.meter.host}:${port}: ${(err as Error).message}`,
        );
      }
      const token = meter.mint(episodeId, cap);
      out(token);
      out(`http://${listener.host.includes(":") ? `[${listener.host}]` : listener.host}:${listener.port}/v1`);
      const signal = await new Promise<NodeJS.Signals>((done) => {
        process.once("SIGINT", () => done("SIGINT"));
        process.once("SIGTERM", () => done("SIGTERM"));
      });
      const summary = await meter.close(token);
      await meter.stop();
      db.close();
      log.info({ signal, episode: episodeId, price_table: meter.priceTableHash }, "meter.standalone.stopped");
      out(JSON.stringify(summary));
      log.flush();
    });
}
