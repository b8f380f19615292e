/**
 * What to tell the operator about a hotkey the validator cannot use, named where the operator
 * changes it: in the compose deployment the host-side settings of docker/.env (WALLETS_DIR,
 * VALIDATOR_UID) and the host's paths, not the paths inside the container. `check --only wallet`
 * (the image's entrypoint runs it before the daemon) prints it under its FAIL line.
 */
import type { Stats } from "node:fs";
import type { Deployment } from "./deployment.js";

/**
 * Pure: what to tell the operator about a hotkey file that cannot be used, from what the file
 * system says. `stat` is the file's (undefined when absent), `wallets` the wallet names found.
 */
export function walletHint(input: {
  dep: Deployment;
  walletPath: string;
  walletName: string;
  walletHotkey: string;
  errCode: string;
  stat: Pick<Stats, "uid" | "gid" | "mode"> | undefined;
  uid: number;
  wallets: readonly string[] | undefined;
  /** The first directory on the way to the file that this process may not enter (a root-owned 0700 tree). */
  closedDir?: { path: string; stat: Pick<Stats, "uid" | "gid" | "mode"> } | undefined;
}): string {
  const { dep } = input;
  const where = dep.inContainer
    ? `the wallets directory mounted from the host (${dep.hostWalletsDir ?? "WALLETS_DIR"}; WALLETS_DIR in docker/.env)`
    : `WALLET_PATH ${input.walletPath}`;
  if (input.closedDir && input.errCode === "EACCES") return closedDirHint(input, input.closedDir);
  if (input.stat && input.errCode === "EACCES") {
    const mode = (input.stat.mode & 0o777).toString(8).padStart(4, "0");
    const owner = input.stat.uid;
    return dep.inContainer
      ? `the hotkey file belongs to uid ${owner} (mode ${mode}) and the validator runs as uid ${input.uid}: set VALIDATOR_UID=${owner} in docker/.env${owner === 0 ? " (the key is root's: the validator then runs as root)" : ""}, or make the key's owner the owner of WALLETS_DIR, then \`${dep.compose} up -d\``
      : `the hotkey file belongs to uid ${owner} (mode ${mode}) and this process runs as uid ${input.uid}: run the validator as uid ${owner}`;
  }
  if (input.errCode === "ENOENT" || input.errCode === "ENOTDIR") {
    const list =
      input.wallets === undefined
        ? ""
        : input.wallets.length
          ? ` Wallets there: ${input.wallets.join(", ")}.`
          : " It holds no wallet at all.";
    const names = "WALLET_NAME / WALLET_HOTKEY in .env.validator";
    return dep.inContainer
      ? `no hotkey ${input.walletName}/hotkeys/${input.walletHotkey} in ${where}.${list} Point WALLETS_DIR in docker/.env at the directory btcli writes (\`btcli wallet list\` shows it), or set ${names}; then \`${dep.compose} up -d\``
      : `no hotkey ${input.walletName}/hotkeys/${input.walletHotkey} under ${where}.${list} Set WALLET_PATH, ${names}`;
  }
  return dep.inContainer
    ? `check the hotkey in ${where} (WALLET_NAME / WALLET_HOTKEY in .env.validator)`
    : `check WALLET_PATH, WALLET_NAME and WALLET_HOTKEY`;
}

/** The hint for a directory on the hotkey's path this process may not enter, named as on the host. */
function closedDirHint(
  input: Parameters<typeof walletHint>[0],
  closed: NonNullable<Parameters<typeof walletHint>[0]["closedDir"]>,
): string {
  const { dep } = input;
  const mode = (closed.stat.mode & 0o777).toString(8).padStart(4, "0");
  const owner = closed.stat.uid;
  const rel = closed.path.startsWith(input.walletPath) ? closed.path.slice(input.walletPath.length) : "";
  const hostPath =
    dep.inContainer && closed.path.startsWith(input.walletPath)
      ? `${dep.hostWalletsDir ?? "WALLETS_DIR"}${rel}`
      : closed.path;
  const which = rel === "" ? "the wallets directory " : "";
  if (!dep.inContainer)
    return `${which}${hostPath} belongs to uid ${owner} (mode ${mode}) and this process runs as uid ${input.uid}, which may not enter it: run the validator as uid ${owner}, or let uid ${input.uid} read the wallet`;
  return `${which}${hostPath} on the host belongs to uid ${owner} (mode ${mode}) and the validator runs as uid ${input.uid}, which may not enter it: set VALIDATOR_UID=${owner} in docker/.env${owner === 0 ? " (the wallet is root's, e.g. made with sudo btcli: the validator then runs as root)" : ""}, or give the wallet tree to one owner (chown -R), then \`${dep.compose} up -d\``;
}

/** The first of the directories down to a hotkey file that this process may not enter (search permission). */
export async function closedDirOnPath(
  walletPath: string,
  walletName: string,
): Promise<{ path: string; stat: Stats } | undefined> {
  const { stat, access, constants } = await import("node:fs/promises");
  const { join } = await import("node:path");
  for (const dir of [walletPath, join(walletPath, walletName), join(walletPath, walletName, "hotkeys")]) {
    const st = await stat(dir).catch(() => undefined);
    if (!st) return undefined;
    if (
      !(await access(dir, constants.X_OK).then(
        () => true,
        () => false,
      ))
    )
      return { path: dir, stat: st };
  }
  return undefined;
}
