#!/usr/bin/env node
/**
 * Bundle the in-container agent (agent/src/main.ts + agent/contract.js) into one dependency-free
 * CommonJS file, agent/dist/agent.js, for Debian bookworm's Node 18; and the same agent behind
 * Hermes' command line (agent/src/hermes.ts) as agent/dist/hermes, an executable whose shebang
 * runs /usr/bin/node directly, so its process is named "hermes" (the offline bench's images).
 *
 *   node scripts/build-agent.mjs                 build both
 *   node scripts/build-agent.mjs --if-stale      build only when a source is newer than the bundle
 *   node scripts/build-agent.mjs --context DIR   also assemble the agent base image's build context in DIR
 *                                                (DIR/Dockerfile … from docker/images/agent-base, DIR/agent.js)
 */
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const AGENT_ENTRY = join(ROOT, "agent/src/main.ts");
export const AGENT_BUNDLE = join(ROOT, "agent/dist/agent.js");
export const HERMES_BUNDLE = join(ROOT, "agent/dist/hermes");
const IMAGE_DIR = join(ROOT, "docker/images/agent-base");

function walk(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...walk(p));
    else out.push(p);
  }
  return out;
}

function sources() {
  return [...walk(join(ROOT, "agent/src")), join(ROOT, "agent/contract.js"), fileURLToPath(import.meta.url)];
}

function isStale() {
  let out;
  try {
    out = Math.min(statSync(AGENT_BUNDLE).mtimeMs, statSync(HERMES_BUNDLE).mtimeMs);
  } catch {
    return true;
  }
  return sources().some((s) => statSync(s).mtimeMs > out);
}

/** Anything but a node: built-in or a relative file would be a run-time dependency: refuse it. */
const nodeBuiltinsOnly = {
  name: "node-builtins-only",
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith("node:")) return { path: args.path, external: true };
      return {
        errors: [{ text: `agent bundle must not depend on "${args.path}" (use node: built-ins only)` }],
      };
    });
  },
};

/** Build the bundle (unless fresh and ifStale). Returns its path, size and sha256. */
export async function buildAgent({ ifStale = false, quiet = false } = {}) {
  if (!(ifStale && !isStale())) {
    let esbuild;
    try {
      esbuild = await import("esbuild");
    } catch {
      throw new Error("esbuild is not installed: run `npm ci` first (it is a devDependency)");
    }
    const common = {
      bundle: true,
      platform: "node",
      target: "node18",
      format: "cjs",
      legalComments: "none",
      logLevel: "warning",
      plugins: [nodeBuiltinsOnly],
    };
    await esbuild.build({
      ...common,
      entryPoints: [AGENT_ENTRY],
      outfile: AGENT_BUNDLE,
      banner: { js: "#!/usr/bin/env node" },
    });
    // `pkill -KILL hermes` (upstream's deadline) matches the process name: the interpreter is
    // named in the shebang itself (no `env`), so the kernel names the process after this file.
    await esbuild.build({
      ...common,
      stdin: {
        contents: 'import { runHermesCli } from "./hermes.js";\nvoid runHermesCli(process.argv.slice(2));\n',
        resolveDir: join(ROOT, "agent/src"),
        sourcefile: "hermes-main.ts",
        loader: "ts",
      },
      outfile: HERMES_BUNDLE,
      banner: { js: "#!/usr/bin/node" },
    });
    // The repository's package.json says "type": "module"; these bundles are CommonJS.
    writeFileSync(join(dirname(AGENT_BUNDLE), "package.json"), '{ "type": "commonjs" }\n');
    chmodSync(AGENT_BUNDLE, 0o755);
    chmodSync(HERMES_BUNDLE, 0o755);
  }
  const bytes = readFileSync(AGENT_BUNDLE);
  const info = {
    path: AGENT_BUNDLE,
    bytes: bytes.length,
    sha256: createHash("sha256").update(bytes).digest("hex"),
  };
  if (!quiet) console.log(`${relative(ROOT, AGENT_BUNDLE)}: ${info.bytes} bytes, sha256 ${info.sha256}`);
  return info;
}

/** Assemble the agent base image's build context: the image dir's files plus agent.js at the root. */
export function assembleContext(dir) {
  mkdirSync(dir, { recursive: true });
  for (const f of walk(IMAGE_DIR)) {
    const to = join(dir, relative(IMAGE_DIR, f));
    mkdirSync(dirname(to), { recursive: true });
    copyFileSync(f, to);
  }
  copyFileSync(AGENT_BUNDLE, join(dir, "agent.js"));
  return dir;
}

const invoked = process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (invoked) {
  const args = process.argv.slice(2);
  const ctxAt = args.indexOf("--context");
  try {
    await buildAgent({ ifStale: args.includes("--if-stale"), quiet: args.includes("--quiet") });
    if (ctxAt !== -1) {
      const dir = args[ctxAt + 1];
      if (!dir) throw new Error("--context needs a directory");
      console.log(`build context assembled in ${assembleContext(resolve(dir))}`);
    }
  } catch (e) {
    console.error(`build-agent: ${e.message}`);
    process.exit(1);
  }
}
