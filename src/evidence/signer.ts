/**
 * Who signs a verdict's evidence. The daemon: its hotkey. `eval`: the configured wallet hotkey when
 * it is readable (an operator checking a set-up signs as the validator), otherwise a local key of
 * this machine, made once under DATA_DIR (btcli's file layout, mode 0600) and named `local` in the
 * manifest: it proves the files are unchanged since they were signed, not who ran the evaluation.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { type Hotkey, hotkeyFromKeyfile, loadHotkey, type WalletLocation } from "../chain/index.js";
import type { Logger } from "../log.js";
import type { EvidenceSigner } from "./signature.js";

/** DATA_DIR/evidence: the evidence files of this data directory and its local signing key. */
export const EVIDENCE_DIR = "evidence";
export const LOCAL_KEY_FILE = "local-signer.json";

export function hotkeySigner(
  hotkey: Pick<Hotkey, "ss58" | "sign">,
  kind: "hotkey" | "local" = "hotkey",
): EvidenceSigner {
  return { ss58: hotkey.ss58, kind, sign: (message) => hotkey.sign(message) };
}

/** DATA_DIR/evidence/local-signer.json, made on first use (never overwritten: `wx`). */
export async function localSigner(dataDir: string): Promise<EvidenceSigner> {
  const path = join(dataDir, EVIDENCE_DIR, LOCAL_KEY_FILE);
  const existing = await readFile(path).catch(() => undefined);
  if (existing) return hotkeySigner(await hotkeyFromKeyfile(existing, `local evidence key ${path}`), "local");
  const seed = `0x${randomBytes(32).toString("hex")}`;
  const key = await hotkeyFromKeyfile(JSON.stringify({ secretSeed: seed }), "a new local evidence key");
  const file = { secretSeed: seed, publicKey: key.publicKey, ss58Address: key.ss58 };
  await mkdir(dirname(path), { recursive: true });
  try {
    await writeFile(path, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600, flag: "wx" });
  } catch (err) {
    // Another process made it first: that one is the key.
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return localSigner(dataDir);
    throw err;
  }
  return hotkeySigner(key, "local");
}

/** The wallet's hotkey when it can be read, else this machine's local key (logged once). */
export async function evalSigner(
  wallet: WalletLocation,
  dataDir: string,
  log: Logger,
): Promise<EvidenceSigner> {
  try {
    return hotkeySigner(await loadHotkey(wallet));
  } catch (err) {
    const signer = await localSigner(dataDir);
    log.info({ signer: signer.ss58, reason: (err as Error).message }, "evidence.local_signer");
    return signer;
  }
}
