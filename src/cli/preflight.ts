/**
 * `trajrl-validator check`: the operator's preflight, run right after `up -d` (README). One line per
 * check — settings, wallet, chain, platform, model provider, Docker, the engine pool, the episode runtime, firewall, disk — each ok, warn or FAIL,
 * with what to change when it is not ok, named as the operator sets it (in the compose deployment:
 * the host-side settings of docker/.env, not the paths inside the container). Exit 0 when nothing
 * FAILed, 1 otherwise. The image's entrypoint runs `check --only wallet` before the daemon starts.
 */
import type { Command } from "commander";
import type { Config } from "../config.js";
import { termLines, termText } from "../terminal-text.js";
import { IDENTITY } from "../version.js";
import type { Deployment } from "./deployment.js";
import { out } from "./io.js";
import { checkRuntime } from "./preflight-runtime.js";
import { closedDirOnPath, walletHint } from "./wallet-hint.js";
import { withTimeout } from "./within.js";

export { COMPOSE, type Deployment, deploymentOf } from "./deployment.js";
export { walletHint } from "./wallet-hint.js";

export type CheckLevel = "ok" | "warn" | "fail";

export interface CheckResult {
  name: CheckName;
  level: CheckLevel;
  detail: string;
  /** What to change, when not ok. */
  fix?: string;
}

export const CHECKS = [
  "config",
  "wallet",
  "chain",
  "platform",
  "llm",
  "docker",
  "engines",
  "runtime",
  "firewall",
  "disk",
] as const;
export type CheckName = (typeof CHECKS)[number];

/** Pure: one line per result, aligned; the fix indented under it. */
export function renderChecks(results: readonly CheckResult[]): string {
  const tag = (l: CheckLevel) => (l === "fail" ? "FAIL" : l).padEnd(4);
  const lines: string[] = [];
  for (const r of results) {
    lines.push(`${tag(r.level)}  ${r.name.padEnd(8)}  ${termText(r.detail)}`);
    if (r.fix) lines.push(`${" ".repeat(16)}→ ${termText(r.fix)}`);
  }
  const fails = results.filter((r) => r.level === "fail").length;
  const warns = results.filter((r) => r.level === "warn").length;
  lines.push(
    fails
      ? `${fails} failed, ${warns} warning(s)`
      : `all checks passed${warns ? ` (${warns} warning(s))` : ""}`,
  );
  return `${lines.join("\n")}\n`;
}

const GiB = 1024 ** 3;

interface Ctx {
  config: Config;
  dep: Deployment;
  timeoutMs: number;
  hotkey?: import("../chain/index.js").Hotkey;
}

/** The settings parsed (else `check` stopped with the error); what parses but looks mistaken is a warning. */
async function checkConfig(ctx: Ctx): Promise<CheckResult> {
  const w = ctx.config.warnings;
  if (!w.length) return { name: "config", level: "ok", detail: "every setting read" };
  return {
    name: "config",
    level: "warn",
    detail: w.join("; "),
    fix: ctx.dep.inContainer
      ? `correct .env.validator, then \`${ctx.dep.compose} up -d\` (the container reads it when it is created)`
      : "correct the environment (.env.validator)",
  };
}

async function checkWallet(ctx: Ctx): Promise<CheckResult> {
  const { loadHotkey, hotkeyPath } = await import("../chain/index.js");
  const c = ctx.config.chain;
  const path = hotkeyPath(c.walletPath, c.walletName, c.walletHotkey);
  try {
    ctx.hotkey = await loadHotkey({
      walletPath: c.walletPath,
      walletName: c.walletName,
      walletHotkey: c.walletHotkey,
    });
    return { name: "wallet", level: "ok", detail: `${c.walletName}/${c.walletHotkey}: ${ctx.hotkey.ss58}` };
  } catch (err) {
    const { stat, readdir } = await import("node:fs/promises");
    const cause = (err as { cause?: NodeJS.ErrnoException }).cause;
    const errCode = cause?.code ?? (err as { code?: string }).code ?? "";
    const st = await stat(path).catch(() => undefined);
    const wallets = await readdir(c.walletPath, { withFileTypes: true })
      .then((d) => d.filter((e) => e.isDirectory()).map((e) => e.name))
      .catch(() => undefined);
    const closedDir = st ? undefined : await closedDirOnPath(c.walletPath, c.walletName);
    return {
      name: "wallet",
      level: "fail",
      detail: (err as Error).message,
      fix: walletHint({
        dep: ctx.dep,
        walletPath: c.walletPath,
        walletName: c.walletName,
        walletHotkey: c.walletHotkey,
        errCode,
        stat: st,
        uid: process.getuid?.() ?? -1,
        wallets,
        closedDir,
      }),
    };
  }
}

async function checkChain(ctx: Ctx): Promise<CheckResult> {
  const { PolkadotChainClient } = await import("../chain/index.js");
  const { silentLogger } = await import("../log.js");
  const c = ctx.config.chain;
  const client = new PolkadotChainClient({
    endpoint: c.endpoint,
    network: c.network,
    log: silentLogger,
    connectTimeoutMs: ctx.timeoutMs,
    requestTimeoutMs: ctx.timeoutMs,
    ...(ctx.hotkey ? { hotkey: ctx.hotkey } : {}),
  });
  const fix = "set NETWORK and SUBTENSOR_ENDPOINT in .env.validator to a node of that network";
  try {
    const info = await client.connect({ signal: AbortSignal.timeout(ctx.timeoutMs) });
    const snap = await withTimeout(client.snapshot(c.netuid), ctx.timeoutMs, "subnet snapshot");
    const head = `${info.chain} (${c.network}) at block ${snap.block}, netuid ${c.netuid}`;
    if (!ctx.hotkey)
      return { name: "chain", level: "warn", detail: `${head}; registration not checked (no wallet)` };
    const me = snap.neurons.find((n) => n.hotkey === ctx.hotkey?.ss58);
    if (!me)
      return {
        name: "chain",
        level: "fail",
        detail: `${head}: hotkey ${ctx.hotkey.ss58} is not registered on netuid ${c.netuid}`,
        fix: `register it (btcli subnet register --netuid ${c.netuid}), or check WALLET_NAME / WALLET_HOTKEY / NETUID`,
      };
    if (!me.validatorPermit)
      return {
        name: "chain",
        level: "warn",
        detail: `${head}: uid ${me.uid}, no validator permit yet (set_weights is refused until it has one)`,
      };
    return { name: "chain", level: "ok", detail: `${head}: uid ${me.uid}, validator permit` };
  } catch (err) {
    return { name: "chain", level: "fail", detail: `${c.endpoint}: ${(err as Error).message}`, fix };
  } finally {
    await client.disconnect().catch(() => {});
  }
}

async function checkPlatform(ctx: Ctx): Promise<CheckResult> {
  const { PlatformClient } = await import("../platform/index.js");
  const { silentLogger } = await import("../log.js");
  const base = ctx.config.platform.baseUrl;
  const fix = "check TRAJECTORYRL_API_BASE_URL in .env.validator and this host's route to it";
  if (!ctx.hotkey)
    return { name: "platform", level: "warn", detail: `${base}: not checked (no wallet to sign with)` };
  const client = new PlatformClient({
    baseUrl: base,
    signer: ctx.hotkey,
    log: silentLogger,
    timeouts: { read: ctx.timeoutMs },
  });
  try {
    const signal = AbortSignal.timeout(ctx.timeoutMs);
    const winner = await client.getWinnerCurrent({ signal });
    const epoch = await client.getEpochCurrent({ signal });
    const seat = winner.winner ? `winner uid ${winner.winner.uid ?? "?"}` : "no winner seated";
    return {
      name: "platform",
      level: "ok",
      detail: `${base}: ${seat}; ${epoch?.epoch ? `challenge epoch ${epoch.epoch.challenge_epoch_id} open` : "no challenge epoch open"} (signed request accepted)`,
    };
  } catch (err) {
    return { name: "platform", level: "fail", detail: `${base}: ${(err as Error).message}`, fix };
  }
}

async function checkLlm(ctx: Ctx): Promise<CheckResult> {
  const l = ctx.config.llm;
  if (l.simulated) {
    const refused = (await import("../daemon/index.js")).evaluatesOnSimulator(ctx.config);
    return {
      name: "llm",
      level: refused ? "fail" : "warn",
      detail: `LLM_API_KEY is empty: the built-in Engy simulator answers every model call${refused ? `; the daemon refuses to evaluate on ${ctx.config.chain.network} without the key` : ""}`,
      fix: "set LLM_API_KEY in .env.validator before validating on the subnet",
    };
  }
  try {
    const res = await fetch(`${l.baseUrl}/models`, {
      headers: { authorization: `Bearer ${l.apiKey}` },
      signal: AbortSignal.timeout(ctx.timeoutMs),
    });
    await res.body?.cancel();
    if (res.ok) return { name: "llm", level: "ok", detail: `${l.baseUrl}: the key is accepted` };
    if (res.status === 401 || res.status === 403)
      return {
        name: "llm",
        level: "fail",
        detail: `${l.baseUrl}: the key is refused (HTTP ${res.status})`,
        fix: "check LLM_API_KEY in .env.validator",
      };
    return { name: "llm", level: "warn", detail: `${l.baseUrl}/models answered HTTP ${res.status}` };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    return {
      name: "llm",
      level: "fail",
      detail: `${l.baseUrl}: ${e.cause?.code ?? e.message}`,
      fix: l.unlocked
        ? "check OFFLINE_LLM_BASE_URL and this host's route to it"
        : "the endpoint is locked in code: check this host's route (DNS, proxy, firewall) to it",
    };
  }
}

async function checkDocker(ctx: Ctx): Promise<CheckResult> {
  const { connectDocker, engineDnsVerdict, DNS_CVE } = await import("../sandbox/index.js");
  const sock = ctx.config.evaluation.dockerSocket;
  try {
    const docker = connectDocker(sock);
    await withTimeout(docker.ping(), ctx.timeoutMs, "Docker ping");
    const v = await withTimeout(docker.version(), ctx.timeoutMs, "Docker version");
    const dns = engineDnsVerdict(v.Version);
    if (dns.affected)
      return {
        name: "docker",
        level: "warn",
        detail: `engine ${v.Version} (API ${v.ApiVersion}) is affected by ${DNS_CVE} (DNS out of internal networks): ${dns.reason}; episode containers get --dns 127.0.0.1, which closes it`,
        fix: "upgrade the engine (26.0+, 25.0.4+, 23.0.11+) when your distribution offers one",
      };
    return { name: "docker", level: "ok", detail: `engine ${v.Version} (API ${v.ApiVersion}) at ${sock}` };
  } catch (err) {
    return {
      name: "docker",
      level: "fail",
      detail: `${sock}: ${(err as Error).message}`,
      fix: ctx.dep.inContainer
        ? "mount the host's Docker socket at /var/run/docker.sock (the compose file does)"
        : "start the engine (bash scripts/docker-up.sh) or set DOCKER_SOCKET",
    };
  }
}

async function iptablesRules(): Promise<string | undefined> {
  const { execFile } = await import("node:child_process");
  const { promisify } = await import("node:util");
  try {
    return (await promisify(execFile)("iptables", ["-w", "5", "-S"], { timeout: 10_000 })).stdout;
  } catch {
    return undefined;
  }
}

/** The pool (ENGINES): each engine answers, with API 1.41 or newer, Linux. Its firewall is the daemon's to install. */
async function checkEngines(ctx: Ctx): Promise<CheckResult> {
  const e = ctx.config.evaluation.engines;
  if (!e.explicit)
    return { name: "engines", level: "ok", detail: "this host's engine alone (ENGINES unset)" };
  const { connectEngine, probeEngine } = await import("../sandbox/index.js");
  const results = await Promise.all(
    e.list.map(async (x) => {
      try {
        const conn = connectEngine({
          url: x.url,
          ...(x.tlsDir ? { tlsDir: x.tlsDir } : {}),
          ...(x.sshKey ? { sshKey: x.sshKey } : {}),
          ...(e.sshAgent ? { sshAgent: e.sshAgent } : {}),
        });
        const f = await withTimeout(probeEngine(conn.docker, ctx.timeoutMs), ctx.timeoutMs, x.name);
        return { name: x.name, ok: true, text: `${x.name} Docker ${f.version}` };
      } catch (err) {
        return { name: x.name, ok: false, text: `${x.name} (${x.url}): ${(err as Error).message}` };
      }
    }),
  );
  const bad = results.filter((r) => !r.ok);
  const detail = results.map((r) => r.text).join("; ");
  if (!bad.length)
    return {
      name: "engines",
      level: "ok",
      detail: `${detail} (each engine's firewall: installed and checked by the daemon at start)`,
    };
  const usable = results.some((r, k) => r.ok && e.list[k]!.slots !== 0);
  return {
    name: "engines",
    level: !results[0]!.ok || !usable ? "fail" : "warn",
    detail,
    fix: "README, Several hosts: the engine's TLS listener (tcp://HOST:2376 with --tlsverify), the certificates' directory (tls=DIR: ca.pem, cert.pem, key.pem), its firewall admitting this host",
  };
}

async function checkFirewall(ctx: Ctx): Promise<CheckResult> {
  const { FIREWALL_CHAIN, canonicalCidr, connectDocker } = await import("../sandbox/index.js");
  const rules = await iptablesRules();
  const pool = canonicalCidr(ctx.config.evaluation.subnetPool);
  if (!ctx.dep.inContainer) {
    if (rules === undefined)
      return {
        name: "firewall",
        level: "warn",
        detail: "iptables cannot be read here (not root, no NET_ADMIN)",
        fix: "run the validator as root or with NET_ADMIN: it installs the episode firewall at start",
      };
    return rules.includes(`-N ${FIREWALL_CHAIN}`)
      ? { name: "firewall", level: "ok", detail: `chain ${FIREWALL_CHAIN} installed on this host` }
      : {
          name: "firewall",
          level: "warn",
          detail: `chain ${FIREWALL_CHAIN} not installed yet`,
          fix: "the daemon installs it at start (trajrl-validator run, as root or with NET_ADMIN)",
        };
  }
  // Compose: the host's chain comes from the firewall service; this container's own from the daemon.
  const problems: string[] = [];
  const notes: string[] = [];
  try {
    const docker = connectDocker(ctx.config.evaluation.dockerSocket);
    const keepers = await withTimeout(
      docker.listContainers({ all: true, filters: { label: ["trajrl.role=firewall"] } }),
      ctx.timeoutMs,
      "listing containers",
    );
    const running = keepers.filter((k) => k.State === "running");
    if (!running.length) problems.push("the firewall service is not running (the host's chain is not kept)");
    else {
      const info = await docker.getContainer(running[0]!.Id).inspect();
      const h = info.State.Health?.Status;
      if (h === "healthy") notes.push(`host chain kept by ${info.Name.replace(/^\//, "")} (healthy)`);
      else problems.push(`the firewall service is ${h ?? "without a health status"}`);
    }
  } catch (err) {
    problems.push(`cannot ask Docker about the firewall service: ${(err as Error).message}`);
  }
  if (rules === undefined) problems.push("iptables cannot be read in this container (NET_ADMIN missing)");
  else if (!rules.includes(`-A INPUT -s ${pool} -j ${FIREWALL_CHAIN}`))
    problems.push(
      `this container's own chain (episode pool ${pool}) is not installed yet: the daemon installs it at start`,
    );
  else notes.push(`own chain for ${pool} installed`);
  if (problems.length)
    return {
      name: "firewall",
      level: "fail",
      detail: [...problems, ...notes].join("; "),
      fix: `${ctx.dep.compose} up -d (starts the firewall service before the validator; the validator needs cap_add NET_ADMIN)`,
    };
  return { name: "firewall", level: "ok", detail: notes.join("; ") };
}

async function checkDisk(ctx: Ctx): Promise<CheckResult> {
  const { statfs, mkdir } = await import("node:fs/promises");
  const dir = ctx.config.dataDir;
  try {
    await mkdir(dir, { recursive: true });
    const s = await statfs(dir);
    const free = s.bavail * s.bsize;
    const detail = `${(free / GiB).toFixed(1)} GiB free under ${dir}`;
    const fix = ctx.dep.inContainer
      ? "free space on the host's Docker data disk (the data volume lives there); `docker system df` shows what uses it"
      : "free space under DATA_DIR, or point DATA_DIR at a larger disk";
    if (free < GiB) return { name: "disk", level: "fail", detail, fix };
    if (free < 5 * GiB) return { name: "disk", level: "warn", detail, fix };
    return { name: "disk", level: "ok", detail };
  } catch (err) {
    return {
      name: "disk",
      level: "fail",
      detail: `${dir}: ${(err as Error).message}`,
      fix: "check DATA_DIR",
    };
  }
}

/** Weight-only mode (EVAL_ENABLED off, upstream's default) runs no episodes: no key, Docker or firewall. */
const evaluatingOnly =
  (name: CheckName, run: (ctx: Ctx) => Promise<CheckResult>) =>
  (ctx: Ctx): Promise<CheckResult> =>
    ctx.config.evaluation.enabled
      ? run(ctx)
      : Promise.resolve({ name, level: "ok", detail: "not used: weight-only mode (EVAL_ENABLED off)" });

const RUNNERS: Record<CheckName, (ctx: Ctx) => Promise<CheckResult>> = {
  config: checkConfig,
  wallet: checkWallet,
  chain: checkChain,
  platform: checkPlatform,
  llm: evaluatingOnly("llm", checkLlm),
  docker: evaluatingOnly("docker", checkDocker),
  engines: evaluatingOnly("engines", checkEngines),
  runtime: evaluatingOnly("runtime", checkRuntime),
  firewall: evaluatingOnly("firewall", checkFirewall),
  disk: checkDisk,
};

/** Run the named checks (the wallet first: the chain and platform checks sign with it). */
export async function runChecks(
  config: Config,
  dep: Deployment,
  names: readonly CheckName[],
  timeoutMs: number,
): Promise<CheckResult[]> {
  const ctx: Ctx = { config, dep, timeoutMs };
  const results = new Map<CheckName, CheckResult>();
  if (names.includes("wallet") || names.includes("chain") || names.includes("platform")) {
    const w = await checkWallet(ctx);
    if (names.includes("wallet")) results.set("wallet", w);
  }
  const rest = names.filter((n) => n !== "wallet");
  const done = await Promise.all(rest.map((n) => RUNNERS[n](ctx)));
  for (const [k, n] of rest.entries()) results.set(n, done[k]!);
  return CHECKS.filter((n) => results.has(n)).map((n) => results.get(n)!);
}

export function registerPreflight(program: Command): void {
  program
    .command("check")
    .description(
      `preflight of this validator's set-up: ${CHECKS.join(", ")}; exit 0 when nothing failed, 1 otherwise`,
    )
    .option("--only <names>", `comma-separated subset of: ${CHECKS.join(",")}`)
    .option("--json", "print the results as JSON")
    .option("--timeout <ms>", "deadline of each network check", "15000")
    .action(async (opts: { only?: string; json?: boolean; timeout: string }) => {
      const { loadConfig } = await import("../config.js");
      const { InputError } = await import("../errors.js");
      const names = (opts.only ? opts.only.split(",").map((s) => s.trim()) : [...CHECKS]) as CheckName[];
      const bad = names.filter((n) => !CHECKS.includes(n));
      if (bad.length)
        throw new InputError("bad_flag", `--only: unknown check ${bad.join(", ")} (${CHECKS.join(", ")})`);
      const timeoutMs = Number(opts.timeout);
      if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
        throw new InputError("bad_flag", `--timeout: not a positive number: ${opts.timeout}`);
      const config = loadConfig();
      const { deploymentOf } = await import("./deployment.js");
      const results = await runChecks(config, await deploymentOf(config), names, timeoutMs);
      if (opts.json) out(JSON.stringify(results, null, 2));
      else process.stdout.write(termLines(`${IDENTITY}\n${renderChecks(results)}`));
      process.exitCode = results.some((r) => r.level === "fail") ? 1 : 0;
    });
}
