/**
 * `trajrl-validator localnet`: a local network to rehearse an epoch (src/localnet) — the chain
 * stand-in with this validator's hotkey registered, the platform stand-in with one challenge epoch
 * and a pack. It prints what to point the validator at, then logs (JSON lines) each verdict the
 * platform accepts and each set_weights the chain includes, until SIGTERM or SIGINT.
 */
import type { Command } from "commander";
import type { Config } from "../config.js";
import type { Localnet, weightsIncluded as WeightsIncluded } from "../localnet/index.js";
import type { Logger } from "../log.js";
import { warn } from "./io.js";

interface LocalnetFlags {
  host: string;
  chainPort: string;
  platformPort: string;
  publicHost?: string;
  pack?: string;
  spec: string;
  epoch: string;
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
      "--epoch <n>",
      "the challenge epoch's id (a validator whose database scored it on this local network skips it: rehearse again with another)",
      "1000",
    )
    .option(
      "--hotkey <ss58>",
      "the validator's hotkey (default: the wallet WALLET_PATH/WALLET_NAME/WALLET_HOTKEY)",
    )
    .action(runLocalnet);
}

async function runLocalnet(flags: LocalnetFlags): Promise<void> {
  const [{ loadConfig }, { createLogger }, { startLocalnet, weightsIncluded }] = await Promise.all([
    import("../config.js"),
    import("../log.js"),
    import("../localnet/index.js"),
  ]);
  const config = loadConfig();
  const n = await numbers(flags);
  const hotkey = flags.hotkey ?? (await walletHotkey(config));
  const { packFile, pack } = await readPack(flags.pack);
  const log = createLogger({ level: config.logLevel });
  const net = await startLocalnet({
    hotkey,
    netuid: config.chain.netuid,
    pack,
    specNumber: n.spec,
    epochId: n.epoch,
    host: flags.host,
    chainPort: n.chainPort,
    platformPort: n.platformPort,
    ...(flags.publicHost ? { publicHost: flags.publicHost } : {}),
    log,
  });
  const { basename } = await import("node:path");
  const e = net.env;
  warn(
    [
      `localnet: chain ${e.SUBTENSOR_ENDPOINT} (genesis ${net.node.blockHash(0)}) · platform ${e.TRAJECTORYRL_API_BASE_URL} · netuid ${e.NETUID}`,
      `  validator ${hotkey} registered at uid ${net.uids.validator} with a validator permit`,
      `  challenge epoch ${net.epoch.challenge_epoch_id}: pack ${net.epoch.challenger_pack_hash.slice(0, 12)} (${basename(packFile)}), spec ${n.spec}`,
      "point the validator at it (.env.validator, or the compose override docker/docker-compose.localnet.yml):",
      `  NETWORK=local SUBTENSOR_ENDPOINT=${e.SUBTENSOR_ENDPOINT} TRAJECTORYRL_API_BASE_URL=${e.TRAJECTORYRL_API_BASE_URL} NETUID=${e.NETUID} EVAL_ENABLED=1`,
    ].join("\n"),
  );
  const seen = reportReceived(net, weightsIncluded, log);
  await new Promise<void>((resolve) => {
    process.once("SIGTERM", resolve);
    process.once("SIGINT", resolve);
  });
  seen.stop();
  await net.close();
  log.info(seen.counts(), "localnet.stopped");
}

async function numbers(flags: LocalnetFlags) {
  const { InputError } = await import("../errors.js");
  const port = (name: string, v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0 || n > 65535)
      throw new InputError("bad_flag", `${name}: not a port: ${v}`);
    return n;
  };
  const whole = (name: string, v: string, min: number, what: string) => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < min) throw new InputError("bad_flag", `${name}: not ${what}: ${v}`);
    return n;
  };
  return {
    chainPort: port("--chain-port", flags.chainPort),
    platformPort: port("--platform-port", flags.platformPort),
    spec: whole("--spec", flags.spec, 0, "a spec number"),
    epoch: whole("--epoch", flags.epoch, 1, "an epoch id (a positive integer)"),
  };
}

/**
 * The validator's hotkey address, read from its wallet. A wallet it cannot use is refused with the
 * validator's own hint (`check`'s wallet check: the one home of that hint), naming what to change on
 * the host in the compose deployment (WALLETS_DIR, VALIDATOR_UID in docker/.env).
 */
async function walletHotkey(config: Config): Promise<string> {
  const [{ loadHotkey }, { InputError, toValidatorError }, { deploymentOf, runChecks }] = await Promise.all([
    import("../chain/index.js"),
    import("../errors.js"),
    import("./preflight.js"),
  ]);
  try {
    return (await loadHotkey(config.chain)).ss58;
  } catch (err) {
    const e = toValidatorError(err);
    const [wallet] = await runChecks(config, await deploymentOf(config), ["wallet"], 15_000);
    const fix = wallet?.fix ? ` → ${wallet.fix}` : "";
    throw new InputError(e.code, `${e.message}${fix}`, { cause: err });
  }
}

async function readPack(file: string | undefined): Promise<{ packFile: string; pack: Buffer }> {
  const [fs, path, repo, { InputError }] = await Promise.all([
    import("node:fs/promises"),
    import("node:path"),
    import("../repo.js"),
    import("../errors.js"),
  ]);
  const packFile = file ?? path.join(repo.REPO_ROOT, "examples/packs/pin.json");
  const pack = await fs.readFile(packFile).catch((err: NodeJS.ErrnoException) => {
    throw new InputError("pack_unreadable", `--pack ${packFile}: ${err.code ?? err.message}`);
  });
  return { packFile, pack };
}

/** What the stand-ins receive, logged as it happens (a 500 ms tick). */
function reportReceived(net: Localnet, weightsIncluded: typeof WeightsIncluded, log: Logger) {
  let verdicts = 0;
  let weights = 0;
  const tick = () => {
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
  };
  const timer = setInterval(tick, 500);
  return { stop: () => clearInterval(timer), counts: () => ({ verdicts, weights }) };
}
