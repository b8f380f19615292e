#!/usr/bin/env node
/**
 * The host's side of the compose deployment, checked before `up -d` recreates anything (README,
 * "Configure, start, watch"; "Upgrading"). Compose v1 — what scripts/setup.sh installs — stops the
 * running validator and renames it `<id>_trajrl_validator` BEFORE it finds out that the new one
 * cannot be created (a WALLETS_DIR that does not exist) or started (a STATUS_PORT someone else
 * holds); the validator is then down until the next good `up -d`, which restarts the old container
 * under the renamed name. So the README's commands run this first:
 *
 *   node scripts/compose-preflight.mjs && docker compose -f docker/docker-compose.validator.yml up -d
 *
 * From the repository root (or with the same `-f FILE`s as compose; docker/.env is read next to the
 * first, ../.env.validator beside it, as compose reads them; the shell's variables win, as in
 * compose). One line per check, `ok` or `FAIL` with the fix; exit 1 when one FAILed. Plain Node, no
 * dependency: it runs before `npm ci` too. It reads files and asks the Docker CLI; it changes nothing.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { createServer } from "node:net";
import { homedir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";

const DEFAULT_FILE = "docker/docker-compose.validator.yml";

/** KEY=VALUE lines as compose reads an env file: comments and blanks skipped, one pair of quotes off. */
export function parseEnvFile(text) {
  const out = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) continue;
    const key = line
      .slice(0, eq)
      .trim()
      .replace(/^export\s+/, "");
    let value = line.slice(eq + 1).trim();
    if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.at(-1) === value[0])
      value = value.slice(1, -1);
    out[key] = value;
  }
  return out;
}

const expandHome = (p) => (p === "~" || p.startsWith("~/") ? join(homedir(), p.slice(2)) : p);

/** Whether uid:gid may do `bit` (4 read, 1 search) on a file of this stat (root may do anything). */
function allowed(st, uid, gid, bit) {
  if (uid === 0) return true;
  const m = st.mode;
  if (st.uid === uid) return ((m >> 6) & bit) === bit;
  if (st.gid === gid) return ((m >> 3) & bit) === bit;
  return (m & bit) === bit;
}

/** The identity the image's entrypoint picks: VALIDATOR_UID, else the wallets' owner unless root, else 10001. */
function identity(env, walletsStat) {
  let uid = env.VALIDATOR_UID ? Number(env.VALIDATOR_UID) : undefined;
  let gid = env.VALIDATOR_GID ? Number(env.VALIDATOR_GID) : undefined;
  if (uid === undefined) {
    uid = 10001;
    if (walletsStat && walletsStat.uid !== 0) {
      uid = walletsStat.uid;
      gid ??= walletsStat.gid;
    }
  }
  return { uid, gid: gid ?? 10001 };
}

function docker(args) {
  try {
    return execFileSync("docker", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
  } catch {
    return undefined;
  }
}

function portFree(port) {
  return new Promise((res) => {
    const s = createServer();
    s.once("error", () => res(false));
    s.listen(port, "127.0.0.1", () => s.close(() => res(true)));
  });
}

function checkWallets(env, validatorEnv, compose) {
  const dir = resolve(expandHome(env.WALLETS_DIR || "~/.bittensor/wallets"));
  const st = existsSync(dir) ? statSync(dir) : undefined;
  if (!st?.isDirectory())
    return [
      {
        name: "wallets",
        fail: true,
        detail: `WALLETS_DIR ${dir} ${st ? "is not a directory" : "does not exist"}`,
        fix: "point WALLETS_DIR in docker/.env at the directory btcli writes (`btcli wallet list` shows it)",
      },
    ];
  const name = validatorEnv.WALLET_NAME || "validator";
  const hotkey = validatorEnv.WALLET_HOTKEY || "default";
  const who = identity(env, st);
  const steps = [dir, join(dir, name), join(dir, name, "hotkeys")];
  for (const d of steps) {
    const s = existsSync(d) ? statSync(d) : undefined;
    if (!s) break;
    if (!allowed(s, who.uid, who.gid, 1))
      return [
        { name: "wallets", fail: false, detail: `WALLETS_DIR ${dir}` },
        {
          name: "hotkey",
          fail: true,
          detail: `${d} belongs to uid ${s.uid} (mode ${(s.mode & 0o777).toString(8).padStart(4, "0")}) and the validator would run as uid ${who.uid}, which may not enter it`,
          fix: `set VALIDATOR_UID=${s.uid} in docker/.env${s.uid === 0 ? " (the wallet is root's: the validator then runs as root)" : ""}, or give the wallet tree to one owner`,
        },
      ];
  }
  const file = join(dir, name, "hotkeys", hotkey);
  const fs = existsSync(file) ? statSync(file) : undefined;
  const ok = { name: "wallets", fail: false, detail: `WALLETS_DIR ${dir}` };
  if (!fs)
    return [
      ok,
      {
        name: "hotkey",
        fail: true,
        detail: `no hotkey ${name}/hotkeys/${hotkey} in ${dir}`,
        fix: `set WALLET_NAME / WALLET_HOTKEY in .env.validator, or WALLETS_DIR in docker/.env (${compose})`,
      },
    ];
  if (!allowed(fs, who.uid, who.gid, 4))
    return [
      ok,
      {
        name: "hotkey",
        fail: true,
        detail: `${file} belongs to uid ${fs.uid} (mode ${(fs.mode & 0o777).toString(8).padStart(4, "0")}) and the validator would run as uid ${who.uid}`,
        fix: `set VALIDATOR_UID=${fs.uid} in docker/.env${fs.uid === 0 ? " (the key is root's: the validator then runs as root)" : ""}`,
      },
    ];
  return [ok, { name: "hotkey", fail: false, detail: `${name}/${hotkey}, readable as uid ${who.uid}` }];
}

async function checkPort(env, project) {
  const text = env.STATUS_PORT || "8080";
  const port = Number(text);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    return {
      name: "port",
      fail: true,
      detail: `STATUS_PORT=${text} is not a port`,
      fix: "set STATUS_PORT in docker/.env to 1..65535",
    };
  if (await portFree(port)) return { name: "port", fail: false, detail: `127.0.0.1:${port} is free` };
  const holders = (docker(["ps", "--filter", `publish=${port}`, "--format", "{{.Names}}"]) ?? "")
    .split("\n")
    .filter(Boolean);
  if (holders.includes(`${project}_validator`))
    return {
      name: "port",
      fail: false,
      detail: `127.0.0.1:${port} is this validator's (${project}_validator)`,
    };
  return {
    name: "port",
    fail: true,
    detail: `127.0.0.1:${port} is taken${holders.length ? ` by ${holders.join(", ")}` : " by another process"}`,
    fix: "free it, or choose another STATUS_PORT in docker/.env",
  };
}

function checkImage(env) {
  const image = env.VALIDATOR_IMAGE || "trajrl.invalid/validator:latest";
  if (docker(["image", "inspect", "--format", "{{.Id}}", image]))
    return { name: "image", fail: false, detail: image };
  return image.startsWith("trajrl.invalid/")
    ? {
        name: "image",
        fail: true,
        detail: `${image} is not built`,
        fix: "node scripts/validator-image.mjs build",
      }
    : { name: "image", fail: false, detail: `${image} is not here yet: \`up\` pulls it` };
}

/** A container an earlier failed `up` renamed (`<id>_<project>_validator`): compose v1 would restart it. */
function checkRenamed(project, compose) {
  const names = (docker(["ps", "-a", "--format", "{{.Names}}"]) ?? "").split("\n");
  const left = names.filter((n) => new RegExp(`^[0-9a-f]{12}_${project}_validator$`).test(n));
  if (!left.length) return { name: "renamed", fail: false, detail: `no leftover of a failed \`up\`` };
  return {
    name: "renamed",
    fail: true,
    detail: `${left.join(", ")}: the validator an earlier failed \`up\` stopped and renamed`,
    fix: `once the rest passes: ${compose} up -d --force-recreate (recreates ${project}_validator and removes ${left.join(", ")})`,
  };
}

function checkEngines(env, files) {
  if (!files.some((f) => basename(f).includes("engines"))) return undefined;
  const dir = resolve(expandHome(env.ENGINES_DIR || "/etc/trajrl/engines"));
  return existsSync(dir)
    ? { name: "engines", fail: false, detail: `ENGINES_DIR ${dir}` }
    : {
        name: "engines",
        fail: true,
        detail: `ENGINES_DIR ${dir} does not exist`,
        fix: "set ENGINES_DIR in docker/.env to the engines' certificates",
      };
}

export async function preflight(files, shellEnv = process.env) {
  const first = resolve(files[0]);
  const envPath = join(dirname(first), ".env");
  const dotenv = existsSync(envPath) ? parseEnvFile(readFileSync(envPath, "utf8")) : {};
  const env = { ...dotenv };
  for (const [k, v] of Object.entries(shellEnv)) if (v !== undefined) env[k] = v;
  const validatorPath = resolve(dirname(first), "../.env.validator");
  const validatorEnv = existsSync(validatorPath)
    ? parseEnvFile(readFileSync(validatorPath, "utf8"))
    : undefined;
  const project = env.COMPOSE_PROJECT_NAME || basename(dirname(first));
  const compose = `docker compose ${files.map((f) => `-f ${f}`).join(" ")}`;
  const results = [
    existsSync(envPath)
      ? { name: "env", fail: false, detail: envPath }
      : {
          name: "env",
          fail: true,
          detail: `${envPath} is missing`,
          fix: "cp docker/.env.example docker/.env, then set WALLETS_DIR",
        },
    validatorEnv
      ? { name: "settings", fail: false, detail: validatorPath }
      : {
          name: "settings",
          fail: true,
          detail: `${validatorPath} is missing`,
          fix: "cp .env.validator.example .env.validator",
        },
    ...checkWallets(env, validatorEnv ?? {}, compose),
    await checkPort(env, project),
    checkImage(env),
    checkEngines(env, files),
    checkRenamed(project, compose),
  ].filter(Boolean);
  return results;
}

function render(results) {
  const lines = [];
  for (const r of results) {
    lines.push(`${r.fail ? "FAIL" : "ok  "}  ${r.name.padEnd(8)}  ${r.detail}`);
    if (r.fail && r.fix) lines.push(`${" ".repeat(16)}→ ${r.fix}`);
  }
  const n = results.filter((r) => r.fail).length;
  lines.push(
    n
      ? `${n} failed: fix before \`up\` (compose v1 stops and renames a running validator before such an \`up\` fails); nothing was changed`
      : "all checks passed",
  );
  return `${lines.join("\n")}\n`;
}

const invokedDirectly =
  process.argv[1] && resolve(process.argv[1]) === resolve(new URL(import.meta.url).pathname);
if (invokedDirectly) {
  const args = process.argv.slice(2);
  const files = [];
  for (let k = 0; k < args.length; k++) {
    if (args[k] === "-f" || args[k] === "--file") files.push(args[++k]);
    else {
      process.stderr.write(`usage: node scripts/compose-preflight.mjs [-f FILE]… (unknown: ${args[k]})\n`);
      process.exit(2);
    }
  }
  const results = await preflight(files.length ? files : [DEFAULT_FILE]);
  process.stdout.write(render(results));
  process.exitCode = results.some((r) => r.fail) ? 1 : 0;
}
