/**
 * The built agent (node agent/dist/agent.js, a child process) against the Engy simulator on a
 * small fixture scenario. The simulator plays a model that knows the container layout (/app,
 * /workspace), so the child runs in a private mount namespace where a temp dir is mounted at /app
 * and another at /workspace, with a private /tmp: nothing on the host is touched and the
 * namespace vanishes with the process. The deliverable is graded here on a hidden input.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseTurnsJsonl } from "../../agent/contract.js";
import { startEngySim } from "../../src/engy-sim/index.js";

const ROOT = resolve(import.meta.dirname, "../..");
const BUNDLE = join(ROOT, "agent/dist/agent.js");
const STRONG = "kimi-k3";
const WEAK = "deepseek-v4.1-flash";
const SEEDS = [1, 2, 3, 4, 5];

const INSTRUCTION = `# Count the non-blank lines

Write one bash script, \`/app/count.sh\`, run as \`bash /app/count.sh FILE\`, that prints the number
of non-blank lines of FILE and nothing else. A line is blank when it holds only whitespace.

It will be tested on other files than \`/app/sample.txt\`. Use bash and standard tools only.
`;
const SOLVE = `#!/usr/bin/env bash
set -euo pipefail
cat > /app/count.sh <<'EOF'
#!/usr/bin/env bash
awk 'NF { n++ } END { print n + 0 }' "$1"
EOF
chmod 0755 /app/count.sh
`;
// Counts whitespace-only lines as non-blank: passes the sample, fails the hidden input.
const PARTIAL = `#!/usr/bin/env bash
set -euo pipefail
printf '#!/usr/bin/env bash\\ngrep -vc "^$" "$1"\\n' > /app/count.sh
`;
const HIDDEN_INPUT = "alpha\n   \n\nbeta\n\t\n  gamma\n";
const HIDDEN_EXPECTED = "3";

/**
 * Runs argv as a process that sees `app` at /app, `ws` at /workspace, the bundle's folder at
 * /agent-dist (the checkout may itself live under /tmp, which is private here) and a private /tmp.
 */
const NAMESPACE_SCRIPT = `set -e
app="$1"; ws="$2"; dist="$3"; shift 3
mount -t tmpfs -o mode=0755 trajrl-agent-root /mnt
for e in /*; do
  n="\${e#/}"
  case "$n" in mnt|tmp|app|workspace|lost+found) continue;; esac
  if [ -L "$e" ]; then ln -s "$(readlink "$e")" "/mnt/$n"
  elif [ -d "$e" ]; then mkdir "/mnt/$n"; mount --rbind "$e" "/mnt/$n"
  fi
done
mkdir /mnt/tmp /mnt/app /mnt/workspace /mnt/mnt /mnt/agent-dist
mount -t tmpfs -o mode=1777 trajrl-agent-tmp /mnt/tmp
mount --bind "$app" /mnt/app
mount --bind "$ws" /mnt/workspace
mount --bind "$dist" /mnt/agent-dist
exec chroot /mnt /bin/sh -c 'cd /app && exec "$@"' sh "$@"
`;

const unshareArgs = () =>
  process.getuid?.() === 0
    ? ["--mount", "--propagation", "private"]
    : ["--user", "--map-root-user", "--mount", "--propagation", "private"];

let root: string;
const children: ChildProcess[] = [];

beforeAll(() => {
  execFileSync(process.execPath, [join(ROOT, "scripts/build-agent.mjs"), "--if-stale", "--quiet"], {
    stdio: "inherit",
  });
  const probe = spawnSync("unshare", [...unshareArgs(), "--", "/bin/sh", "-c", "mount -t tmpfs probe /mnt"], {
    encoding: "utf8",
  });
  if (probe.status !== 0)
    throw new Error(
      `this test runs the agent in a private mount namespace and cannot create one ` +
        `(unshare: ${probe.error?.message ?? probe.stderr.trim()}); run it as root or enable unprivileged user namespaces`,
    );
  root = mkdtempSync(join(tmpdir(), "agent-sim-"));
  const sc = join(root, "scenarios/count-nonblank");
  mkdirSync(join(sc, "solution"), { recursive: true });
  writeFileSync(join(sc, "instruction.md"), INSTRUCTION);
  writeFileSync(join(sc, "solution/solve.sh"), SOLVE);
  writeFileSync(join(sc, "solution/partial.sh"), PARTIAL);
});
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  if (root) rmSync(root, { recursive: true, force: true });
});

interface Outcome {
  exit: number | null;
  solved: boolean;
  reason: string | undefined;
  turns: number;
  repaired: number;
}

async function episode(model: string, seed: number): Promise<Outcome> {
  const sim = await startEngySim({ port: 0, seed, scenariosDir: join(root, "scenarios"), latencyScale: 0 });
  const run = join(root, `run-${model}-${seed}`);
  const app = join(run, "app");
  const ws = join(run, "ws");
  mkdirSync(app, { recursive: true });
  mkdirSync(ws, { recursive: true });
  writeFileSync(join(app, "sample.txt"), "one\n\ntwo\nthree\n");
  writeFileSync(join(ws, "SKILL.md"), "# Skill\nRead the task, write the deliverable, run it once.\n");
  writeFileSync(join(ws, "INSTRUCTION.md"), INSTRUCTION);
  try {
    const child = spawn(
      "unshare",
      [
        ...unshareArgs(),
        "--",
        "/bin/sh",
        "-c",
        NAMESPACE_SCRIPT,
        "sh",
        app,
        ws,
        dirname(BUNDLE),
        process.execPath,
        `/agent-dist/${basename(BUNDLE)}`,
      ],
      {
        env: {
          PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          HOME: "/tmp",
          LLM_BASE_URL: sim.url,
          LLM_MODEL: model,
          LLM_API_KEY: "sim-key",
          AGENT_MAX_TURNS: "20",
          AGENT_RETRY_BASE_MS: "1",
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    children.push(child);
    let stderr = "";
    child.stderr?.on("data", (d) => {
      stderr += d;
    });
    const exit = await new Promise<number | null>((ok) => child.on("close", (code) => ok(code)));
    const turnsPath = join(ws, "turns.jsonl");
    if (!existsSync(turnsPath)) throw new Error(`no turns.jsonl (exit ${exit}): ${stderr.slice(-2000)}`);
    const t = parseTurnsJsonl(readFileSync(turnsPath, "utf8"));
    let solved = false;
    if (existsSync(join(app, "count.sh"))) {
      const hidden = join(run, "hidden.txt");
      writeFileSync(hidden, HIDDEN_INPUT);
      const r = spawnSync("bash", [join(app, "count.sh"), hidden], { encoding: "utf8", timeout: 10_000 });
      solved = r.status === 0 && r.stdout.trim() === HIDDEN_EXPECTED;
    }
    return {
      exit,
      solved,
      reason: t.summary?.reason,
      turns: t.turns.length,
      repaired: t.turns.flatMap((x) => x.tool_calls).filter((c) => c.repaired !== undefined).length,
    };
  } finally {
    await sim.close();
  }
}

describe("agent against the Engy simulator", () => {
  it("solves with a strong model and fails more often with a weak one, on the same draws", async () => {
    const strong: Outcome[] = [];
    const weak: Outcome[] = [];
    for (const seed of SEEDS) {
      strong.push(await episode(STRONG, seed));
      weak.push(await episode(WEAK, seed));
    }
    const summary = (o: Outcome[]) =>
      o.map((x) => `${x.solved ? "solved" : "failed"}/${x.reason}/${x.turns}t/${x.repaired}r`).join(" ");
    // Every session ends on its own (the model stops), exit 0, with a summary line.
    for (const o of [...strong, ...weak]) {
      expect(o.exit, summary([o])).toBe(0);
      expect(o.reason).toBe("completed");
      expect(o.turns).toBeGreaterThanOrEqual(3);
    }
    console.info(`agent-sim: ${STRONG}: ${summary(strong)}\nagent-sim: ${WEAK}: ${summary(weak)}`);
    const strongWins = strong.filter((o) => o.solved).length;
    const weakWins = weak.filter((o) => o.solved).length;
    expect(strongWins, `strong: ${summary(strong)}`).toBeGreaterThanOrEqual(4);
    expect(weakWins, `weak: ${summary(weak)} vs strong: ${summary(strong)}`).toBeLessThan(strongWins);
    // Common random numbers: wherever the weak model solved, the strong one did too.
    SEEDS.forEach((_, i) => {
      if (weak[i]!.solved) expect(strong[i]!.solved).toBe(true);
    });
  }, 240_000);
});
