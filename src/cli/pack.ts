import { readFile, writeFile } from "node:fs/promises";
import type { Command } from "commander";
import { InputError } from "../errors.js";
import {
  buildPack,
  loadPack,
  type Pack,
  PLATFORM_MAX_PACK_BYTES,
  packHashOf,
  parsePackBytes,
} from "../pack/index.js";
import { termText } from "../terminal-text.js";
import { out, warn } from "./io.js";

async function readPackFile(file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new InputError(
      "file_not_readable",
      termText(`${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`),
    );
  }
}

/** What a miner should know about a pack validators accept: none of it changes the verdict. */
export function packWarnings(p: Pack): string[] {
  const w: string[] = [];
  if (p.canonicalBytes > PLATFORM_MAX_PACK_BYTES)
    w.push(
      `the platform refuses submissions over ${PLATFORM_MAX_PACK_BYTES} bytes (this pack is ${p.canonicalBytes})`,
    );
  for (const s of p.skippedFiles)
    w.push(`files[${JSON.stringify(s.name)}] is ${s.type}, not text: validators skip it`);
  if (!p.policyTree.ok)
    w.push(
      `validators cannot set up this pack's policy sidecar, so every scenario scores 0: ${p.policyTree.reason}`,
    );
  else
    for (const m of p.policyTree.moved)
      w.push(
        m.path === null
          ? `files[${JSON.stringify(m.name)}] is written nowhere in the sidecar`
          : `files[${JSON.stringify(m.name)}] is written to /policy/${m.path}`,
      );
  if (p.policyTree.ok && p.policyTree.runtime === "replaced")
    w.push("a pack file replaces the sidecar's runtime (/policy/sdk/trajrl_policy.py)");
  return w;
}

export function registerPack(program: Command): void {
  const pack = program.command("pack").description("build, hash and validate Season 2 packs");

  pack
    .command("hash")
    .description("print the pack_hash (sha256 of the Python-canonical JSON)")
    .argument("<file>", "pack JSON file")
    .action(async (file: string) => {
      const parsed = parsePackBytes(await readPackFile(file));
      if (!parsed.ok)
        throw new InputError(parsed.rejection.code, termText(`${file}: ${parsed.rejection.message}`));
      out(packHashOf(parsed.value));
    });

  pack
    .command("validate")
    .description(
      "exit 0 when validators accept the pack (warnings on stderr); else exit 1 with the rejection code and reason",
    )
    .argument("<file>", "pack JSON file")
    .option("--hash <sha256>", "also verify the content hash (pack_verify_failed on mismatch)")
    .option("--json", "print the result as JSON")
    .action(async (file: string, opts: { hash?: string; json?: boolean }) => {
      const result = loadPack(await readPackFile(file), opts.hash);
      if (opts.json) {
        out(
          JSON.stringify(
            result.ok
              ? {
                  valid: true,
                  pack_hash: result.pack.hash,
                  entry_point: result.pack.entryPoint,
                  bytes: result.pack.canonicalBytes,
                  files: [...result.pack.policyFileOrder],
                  warnings: packWarnings(result.pack),
                }
              : { valid: false, code: result.rejection.code, reason: result.rejection.message },
          ),
        );
        if (!result.ok) process.exitCode = 1;
        return;
      }
      if (!result.ok)
        throw new InputError(
          result.rejection.code,
          `${result.rejection.code}: ${termText(result.rejection.message)}`,
        );
      const p = result.pack;
      // A miner names these files: one line each, whatever the names hold.
      const files = p.policyFileOrder.map(termText);
      for (const w of packWarnings(p)) warn(`warning: ${termText(w)}`);
      out(
        `valid: ${p.hash} (${p.canonicalBytes} bytes, entry point ${p.entryPoint}${files.length ? `, files: ${files.join(", ")}` : ""})`,
      );
    });

  pack
    .command("build")
    .description("build a pack from SKILL.md and an optional policy directory (text files only)")
    .argument("<skill-md>", "path to SKILL.md")
    .option("--policy <dir>", "policy directory (policy.py or policy.json, plus helper text files)")
    .requiredOption("-o, --out <file>", "where to write pack.json")
    .action(async (skillMd: string, opts: { policy?: string; out: string }) => {
      const built = await buildPack(skillMd, opts.policy);
      await writeFile(opts.out, built.json);
      for (const s of built.skipped) warn(`skipped ${termText(s)}`);
      out(
        `${built.pack.hash}  ${opts.out} (${built.pack.canonicalBytes} bytes, entry point ${built.pack.entryPoint})`,
      );
    });
}
