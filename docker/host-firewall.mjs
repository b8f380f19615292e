#!/usr/bin/env node
/**
 * The episode firewall (chain TRAJRL-EPISODE and its INPUT jumps, src/sandbox/firewall.ts), installed in
 * the network namespace this runs in. The compose file runs it with `network_mode: host` and NET_ADMIN
 * next to the validator, because the validator runs in its own network namespace (DAEMON_IN_CONTAINER=1:
 * it joins each episode's meter network) and cannot reach the host's INPUT chain itself.
 *
 *   node docker/host-firewall.mjs            install once, exit 0 (1 when iptables fails)
 *   node docker/host-firewall.mjs --keep 60  install, then re-check every 60 s (rules vanish on a host
 *                                            reboot or a firewall reload; the validator restarts on its
 *                                            own after a reboot). /run/trajrl-firewall.ok exists while
 *                                            the last check succeeded (the compose healthcheck).
 * Idempotent: when the rules are in place nothing changes.
 */
import { rmSync, writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { createLogger } from "../dist/log.js";
import { installFirewall, METER_EPISODE_PORT } from "../dist/sandbox/index.js";

const OK_FILE = "/run/trajrl-firewall.ok";
const log = createLogger({ name: "trajrl-firewall" });
const keepAt = process.argv.indexOf("--keep");
const everyS = keepAt > 0 ? Number(process.argv[keepAt + 1]) : 0;
if (keepAt > 0 && !(everyS >= 1)) {
  process.stderr.write("usage: host-firewall.mjs [--keep SECONDS]\n");
  process.exit(2);
}

async function once() {
  try {
    await installFirewall({ meterPort: METER_EPISODE_PORT, log });
    writeFileSync(OK_FILE, `${new Date().toISOString()}\n`);
    return true;
  } catch (err) {
    rmSync(OK_FILE, { force: true });
    log.error({ code: err.code, err: err.message }, "firewall.install_failed");
    return false;
  }
}

if (!everyS) process.exitCode = (await once()) ? 0 : 1;
else {
  const stop = new AbortController();
  for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => stop.abort());
  while (!stop.signal.aborted) {
    await once();
    await sleep(everyS * 1000, undefined, { signal: stop.signal }).catch(() => {});
  }
}
