/**
 * A held start ends by itself once its cause is gone (src/daemon/hold.ts; issue 35 item 3): the
 * hotkey file appears, or the local chain comes up (its genesis hash names the daemon's network, so
 * until it answers the daemon cannot know whose rows are its own). In process, on the daemon tests'
 * world (test/helpers/daemon-world.ts): the real Daemon, chain client, SQLite and fake platform.
 */
import { rename } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { Daemon, startOrHold } from "../../src/daemon/index.js";
import { LOCALNET_GENESIS_HASH } from "../../src/localnet/index.js";
import { createLogger } from "../../src/log.js";
import { LiveStatus } from "../../src/status/index.js";
import { corePipeline, startSubnet, testConfig, until, writeWallet } from "../helpers/daemon.js";
import { FAST, readPinPack, runCleanups, world } from "../helpers/daemon-world.js";
import { freePort } from "../helpers/ports.js";

let pinBytes: Buffer;
beforeAll(async () => {
  pinBytes = await readPinPack();
});
afterEach(runCleanups);

const log = createLogger({ level: "silent" });
const FAST_RECHECK = { refusal: 150, transient: 150 };

function hold(config: ReturnType<typeof testConfig>, live: LiveStatus, signal: AbortSignal) {
  const { pipeline } = corePipeline({ scenarios: ["alpha"] });
  const daemons: Daemon[] = [];
  const started = startOrHold({
    makeDaemon: () => {
      const d = new Daemon({ config, log, live, pipeline, scenarios: ["alpha"], timing: FAST });
      daemons.push(d);
      return d;
    },
    live,
    log,
    signal,
    recheckMs: FAST_RECHECK,
  });
  return { started, daemons };
}

describe("a held start", () => {
  it("holds a missing hotkey file with the reason on LiveStatus, and starts once the file is there", async () => {
    const w = await world();
    w.fake.openEpoch({ packBytes: pinBytes, challengerHotkey: w.subnet.challenger, specNumber: 900 });
    const keyFile = join(w.wallet.walletPath, w.wallet.walletName, "hotkeys", w.wallet.walletHotkey);
    await rename(keyFile, `${keyFile}.away`);
    const live = new LiveStatus();
    const stop = new AbortController();
    const h = hold(w.config, live, stop.signal);
    await until(() => live.alarms.has("start_held"), 20_000, "the hold");
    expect(live.alarms.get("start_held")!.message).toMatch(
      /^the daemon holds its start \(wallet_not_found\): hotkey file not found: .* — checked again every 0 s/,
    );
    await until(() => h.daemons.length >= 3, 20_000, "re-checks");

    await rename(`${keyFile}.away`, keyFile);
    const daemon = (await h.started)!;
    expect(daemon).toBe(h.daemons.at(-1));
    expect(live.alarms.has("start_held")).toBe(false);
    // It runs: the epoch is evaluated and posted.
    await until(() => (w.fake.scores.get(1000)?.length ?? 0) === 1, 30_000, "the verdict");
    await daemon.stop();
  }, 120_000);

  it("on a local network whose chain does not answer yet: held (its genesis names the network), then started on it", async () => {
    const dir = (await world()).dir;
    const wallet = await writeWallet(join(dir, "local"));
    const port = await freePort();
    const config = testConfig({
      dataDir: join(dir, "local-data"),
      wallet,
      platformUrl: "http://127.0.0.1:9",
      chainUrl: `ws://127.0.0.1:${port}`,
      env: { NETWORK: "local", LLM_API_KEY: "", EVAL_ENABLED: "0" },
    });
    const live = new LiveStatus();
    const stop = new AbortController();
    const h = hold(config, live, stop.signal);
    await until(() => live.alarms.has("start_held"), 60_000, "the hold");
    expect(live.alarms.get("start_held")!.message).toMatch(
      /^the daemon holds its start \(local_chain_unreachable\): the local chain at ws:\/\/127\.0\.0\.1:\d+\/? does not answer/,
    );

    const subnet = await startSubnet(wallet.ss58, { genesisHash: LOCALNET_GENESIS_HASH, port });
    try {
      const daemon = (await h.started)!;
      expect(daemon.network).toBe(LOCALNET_GENESIS_HASH);
      expect(live.alarms.has("start_held")).toBe(false);
      await daemon.stop();
    } finally {
      await subnet.node.stop();
    }
  }, 180_000);
});
