import { readFile, writeFile } from "node:fs/promises";
import type { Command } from "commander";
import { InputError } from "../errors.js";
import { buildPack, loadPack, packHashOf, parsePackBytes } from "../pack/index.js";
import { out } from "./io.js";

async function readPackFile(file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new InputError(
      "file_not_readable",
      `${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
}

export function registerPack(program: Command): void {
  const pack = program.command("pack").description("build, hash and validate Season 2 packs");

  pack
    .command("hash")
    .description("print the pack_hash (sha256 of the Python-canonical JSON)")
    .argument("<file>", "pack JSON file")
    .action(async (file: string) => {
      const parsed = parsePackBytes(await readPackFile(file));
      if (!parsed.ok) throw new InputError(parsed.rejection.code, `${file}: ${parsed.rejection.message}`);
      out(packHashOf(parsed.value));
    });

  pack
    .command("validate")
    .description("exit 0 when the pack is valid; else exit 1 with the rejection code and reason")
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
                  files: Object.keys(result.pack.policyFiles),
                }
              : { valid: false, code: result.rejection.code, reason: result.rejection.message },
          ),
        );
        if (!result.ok) process.exitCode = 1;
        return;
      }
      if (!result.ok)
        throw new InputError(result.rejection.code, `${result.rejection.code}: ${result.rejection.message}`);
      const p = result.pack;
      const files = Object.keys(p.policyFiles);
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
      for (const s of built.skipped) process.stderr.write(`skipped ${s}\n`);
      out(
        `${built.pack.hash}  ${opts.out} (${built.pack.canonicalBytes} bytes, entry point ${built.pack.entryPoint})`,
      );
    });
}
