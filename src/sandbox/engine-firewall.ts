/**
 * The episode firewall of an engine other than the daemon's own, installed and read back through
 * that engine's API: a short-lived helper container in the engine host's network namespace
 * (`--network host`, NET_ADMIN and NET_RAW only, the relay image's iptables) runs
 * engineFirewallScript(), and its output is checked rule by rule. The engine's API is root on its
 * host anyway; this asks for nothing more than the host-firewall keeper of the compose file does.
 */
import { randomBytes } from "node:crypto";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import { readLogs } from "./container-output.js";
import { createContainer, removeContainer, startContainer, waitExit } from "./containers.js";
import type { Docker } from "./docker.js";
import { engineFirewallScript, verifyEngineFirewall } from "./firewall.js";
import { LABEL, type SandboxSession } from "./labels.js";
import { RUNC_RUNTIME } from "./runtime.js";

const HELPER_TIMEOUT_MS = 60_000;

export async function installEngineFirewall(
  docker: Docker,
  opts: { image: string; session: SandboxSession; log: Logger; signal?: AbortSignal },
): Promise<void> {
  const name = `trajrl-firewall-${randomBytes(5).toString("hex")}`;
  const c = await createContainer(docker, RUNC_RUNTIME, {
    name,
    image: opts.image,
    entrypoint: ["/bin/sh", "-c", engineFirewallScript()],
    user: "0:0",
    labels: {
      [LABEL.role]: "engine-firewall",
      [LABEL.session]: opts.session.id,
      [LABEL.episode]: name,
      [LABEL.expires]: String(Math.ceil(Date.now() / 1000 + 600)),
      [LABEL.host]: opts.session.host,
      [LABEL.pid]: String(opts.session.pid),
    },
    limits: { cpus: 0.5, memoryBytes: 128 * 1024 * 1024, pidsLimit: 64 },
    network: { kind: "host" },
    dropAllCaps: true,
    capAdd: ["NET_ADMIN", "NET_RAW"],
    readOnlyRoot: true,
    tmpfs: { "/run": "rw,nosuid,nodev,size=1m" },
  });
  try {
    await startContainer(c);
    const timeout = AbortSignal.timeout(HELPER_TIMEOUT_MS);
    const code = await waitExit(c, opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout);
    const logs = await readLogs(c, 256 * 1024);
    if (code !== 0)
      throw new InfraError(
        "engine_firewall_failed",
        `the episode firewall could not be installed (exit ${code}): ${logs.stderr.trim().slice(-400) || logs.stdout.trim().slice(-400) || "no output"}`,
      );
    const problems = verifyEngineFirewall(logs.stdout);
    if (problems.length)
      throw new InfraError(
        "engine_firewall_missing",
        `the episode firewall is not in place: ${problems.join("; ")}`,
      );
    opts.log.info("engine.firewall_installed");
  } finally {
    await removeContainer(docker, name).catch(() => undefined);
  }
}
