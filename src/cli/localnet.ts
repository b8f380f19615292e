/**
 * `trajrl-validator localnet`: a local network to rehearse an epoch (src/localnet) — the chain
 * stand-in with this validator's hotkey registered, the platform stand-in with one challenge epoch
 * and a pack. It prints what to point the validator at, then logs (JSON lines) each verdict the
 * platform accepts and each set_weights the chain includes, until SIGTERM or SIGINT.
 */
import type { Command } from "commander";
import { warn } from "./io.js";

interface LocalnetFlags {
  host: string;
  chainPort: string;
  platformPort: string;
  publicHost?: string;
  pack?: string;
  spec: string;
  hotkey?: string;
}

export function registerLocalnet(program: Command): void {
  program
    .command("localnet")
    .description(
      "a local chain (this hotkey registered) and platform (one challenge epoch with a pack) to rehearse an epoch against",
    )
    .option("--host <addr>", "address to listen on", "127.0.0.1")
    .option("--chain-port <port>", "the chain's websocket port", "9944")
    .option("--platform-port <port>", "the platform's HTTP port", "8088")
    .option("--public-host <name>", "host name the validator reaches them by (default: --host)")
    .option("--pack <file>", "the challenger's pack (default examples/packs/pin.json)")
    .option(
      "--spec <n>",
      "the subnet spec the epoch names (a registry bench evaluates it; the built-in suite runs SUITE whatever it is)",
      "27",
    )
    .option(
      "--hotkey <ss58>",
      "the validator's hotkey (default: the wallet WALLET_PATH/WALLET_NAME/WALLET_HOTKEY)",
    )
    .action(async (flags: LocalnetFlags) => {
      const [
        { loadConfig },
        { InputError },
        { createLogger },
        { startLocalnet, weightsIncluded },
        fs,
        path,
        repo,
      ] = await Promise.all([
        import("../config.js"),
        import("../errors.js"),
        import("../log.js"),
        import("../localnet/index.js"),
        import("node:fs/promises"),
        import("node:path"),
        import("../repo.js"),
      ]);
      const config = loadConfig();
      const port = (name: string, v: string) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 0 || n > 65535)
          throw new InputError("bad_flag", `${name}: not a port: ${v}`);
        return n;
      };
      const spec = Number(flags.spec);
      if (!Number.isInteger(spec) || spec < 0)
        throw new InputError("bad_flag", `--spec: not a spec number: ${flags.spec}`);
      let hotkey = flags.hotkey;
      if (!hotkey) {
        const { loadHotkey } = await import("../chain/index.js");
        hotkey = (await loadHotkey(config.chain)).ss58;
      }
      const packFile = flags.pack ?? path.join(repo.REPO_ROOT, "examples/packs/pin.json");
      const pack = await fs.readFile(packFile).catch((err: NodeJS.ErrnoException) => {
        throw new InputError("pack_unreadable", `--pack ${packFile}: ${err.code ?? err.message}`);
      });
      const log = createLogger({ level: config.logLevel });
      const net = await startLocalnet({
        hotkey,
        netuid: config.chain.netuid,
        pack,
        specNumber: spec,
        host: flags.host,
        chainPort: port("--chain-port", flags.chainPort),
        platformPort: port("--platform-port", flags.platformPort),
        ...(flags.publicHost ? { publicHost: flags.publicHost } : {}),
        log,
      });
      const e = net.env;
      warn(
        [
          `localnet: chain ${e.SUBTENSOR_ENDPOINT} · platform ${e.TRAJECTORYRL_API_BASE_URL} · netuid ${e.NETUID}`,
          `  validator ${hotkey} registered at uid ${net.uids.validator} with a validator permit`,
          `  challenge epoch ${net.epoch.challenge_epoch_id}: pack ${net.epoch.challenger_pack_hash.slice(0, 12)} (${path.basename(packFile)}), spec ${spec}`,
          "point the validator at it (.env.validator, or the compose override docker/docker-compose.localnet.yml):",
          `  NETWORK=local SUBTENSOR_ENDPOINT=${e.SUBTENSOR_ENDPOINT} TRAJECTORYRL_API_BASE_URL=${e.TRAJECTORYRL_API_BASE_URL} NETUID=${e.NETUID} EVAL_ENABLED=1`,
        ].join("\n"),
      );

      // What the stand-ins receive, as it happens.
      let verdicts = 0;
      let weights = 0;
      const watch = setInterval(() => {
        const scores = [...net.platform.scores.entries()].flatMap(([epoch, bodies]) =>
          bodies.map((b) => ({ epoch, b })),
        );
        for (const { epoch, b } of scores.slice(verdicts)) {
          const c = (b.challenger ?? {}) as { score?: number; qualified?: boolean };
          log.info(
            { epoch, validator: b.validator_hotkey, score: c.score, qualified: c.qualified },
            "localnet.verdict_posted",
          );
        }
        verdicts = scores.length;
        const included = weightsIncluded(net.node);
        for (const x of included.slice(weights))
          log.info({ block: x.blockNumber, signer: x.signer, args: x.call?.args }, "localnet.weights_set");
        weights = included.length;
      }, 500);
      await new Promise<void>((resolve) => {
        process.once("SIGTERM", resolve);
        process.once("SIGINT", resolve);
      });
      clearInterval(watch);
      await net.close();
      log.info({ verdicts, weights }, "localnet.stopped");
    });
}
