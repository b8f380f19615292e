/**
 * The trajrl-bench probes, as upstream's validator runs them: throw-away containers of the bench
 * image (entrypoint empty, 2 GB, 1 CPU; no network here — the probes read files of the image),
 * `python -m trajrl_bench.cli scenarios` and `… scenario-info --scenario X`, JSON on stdout. The
 * answers are parsed with zod here, at the boundary; a malformed or missing answer is an infra
 * error that names the probe.
 */
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { InfraError } from "../errors.js";
import { pythonInt } from "../python-int.js";
import {
  createContainer,
  type Docker,
  LABEL,
  RUNC_RUNTIME,
  readLogs,
  removeContainer,
  type SandboxSession,
  startContainer,
  waitExit,
} from "../sandbox/index.js";

const GiB = 1024 ** 3;
const PROBE_TIMEOUT_MS = 120_000;

export const ScenariosProbe = z.object({
  version: z.string().default("unknown"),
  scenarios: z.array(z.string().min(1)),
  harness_name: z.string().optional(),
  harness_version: z.string().optional(),
});
export type ScenariosProbe = z.infer<typeof ScenariosProbe>;

/** An absolute POSIX path without `..` segments (where the deliverable is read and written back). */
const absolutePath = z
  .string()
  .regex(/^\/[^\0]*$/, "an absolute path")
  .refine((p) => !p.split("/").includes(".."), "no '..' segments");

export const ScenarioInfoProbe = z.object({
  version: z.string().default("unknown"),
  name: z.string().min(1),
  image_repo: z.string().min(1),
  instruction_md: z.string(),
  agent_output_path: absolutePath,
  // Upstream: int(info.get("verifier_timeout_s", 300)).
  verifier_timeout_s: z.unknown().transform((v, ctx) => {
    const n = v === undefined ? 300 : pythonInt(v);
    if (n === undefined || n <= 0) {
      ctx.addIssue({ code: "custom", message: "not a positive integer" });
      return z.NEVER;
    }
    return n;
  }),
  // Older bench images do not send it, and upstream (_pick_episode_timeout) takes only a positive
  // number: anything else falls back to the configured default.
  agent_timeout_s: z
    .unknown()
    .transform((v) => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : undefined)),
  tests_files_b64: z
    .record(z.string().regex(/^[^/\0]+$/, "a file name"), z.string().base64())
    .refine((f) => "test.sh" in f, "ships no test.sh"),
});
export type ScenarioInfoProbe = z.infer<typeof ScenarioInfoProbe>;

/** Run `argv` in a throw-away container of `image` and return its stdout (exit 0 required). */
async function runProbe(
  docker: Docker,
  session: SandboxSession,
  image: string,
  argv: readonly string[],
  what: string,
  signal?: AbortSignal,
): Promise<string> {
  const name = `trajrl-probe-${randomBytes(5).toString("hex")}`;
  const c = await createContainer(docker, RUNC_RUNTIME, {
    name,
    image,
    entrypoint: [],
    cmd: argv,
    labels: {
      [LABEL.role]: "probe",
      [LABEL.session]: session.id,
      [LABEL.episode]: name,
      [LABEL.expires]: String(Math.ceil(Date.now() / 1000 + 600)),
      [LABEL.host]: session.host,
      [LABEL.pid]: String(session.pid),
    },
    limits: { cpus: 1, memoryBytes: 2 * GiB, pidsLimit: 256 },
    network: { kind: "none" },
    dropAllCaps: true,
    logMaxBytes: 64 * 1024 * 1024,
  });
  try {
    const timeout = AbortSignal.timeout(PROBE_TIMEOUT_MS);
    await startContainer(c);
    let code: number;
    try {
      code = await waitExit(c, signal ? AbortSignal.any([signal, timeout]) : timeout);
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new InfraError(
        "bench_probe_timeout",
        `${what} did not answer within ${PROBE_TIMEOUT_MS / 1000} s`,
        {
          cause: err,
        },
      );
    }
    const logs = await readLogs(c, 48 * 1024 * 1024);
    if (code !== 0)
      throw new InfraError(
        "bench_probe_failed",
        `${what} exited with status ${code}: ${logs.stderr.trim().slice(-500) || "(no output)"}`,
        { retryable: false },
      );
    return logs.stdout;
  } finally {
    await removeContainer(docker, name).catch(() => undefined);
  }
}

function parseProbe<T>(schema: z.ZodType<T>, stdout: string, what: string): T {
  let raw: unknown;
  try {
    raw = JSON.parse(stdout);
  } catch (err) {
    throw new InfraError("bench_probe_malformed", `${what} printed no JSON: ${(err as Error).message}`, {
      retryable: false,
    });
  }
  const r = schema.safeParse(raw);
  if (!r.success) {
    const why = r.error.issues.map((i) => `${i.path.map(String).join(".") || "(answer)"}: ${i.message}`);
    throw new InfraError("bench_probe_malformed", `${what} answered unexpectedly: ${why.join("; ")}`, {
      retryable: false,
    });
  }
  return r.data;
}

export async function probeScenarios(
  docker: Docker,
  session: SandboxSession,
  image: string,
  signal?: AbortSignal,
): Promise<ScenariosProbe> {
  const what = `the bench probe \`trajrl_bench.cli scenarios\` of ${image}`;
  const out = await runProbe(
    docker,
    session,
    image,
    ["python", "-m", "trajrl_bench.cli", "scenarios"],
    what,
    signal,
  );
  return parseProbe(ScenariosProbe, out, what);
}

export async function probeScenarioInfo(
  docker: Docker,
  session: SandboxSession,
  image: string,
  scenario: string,
  signal?: AbortSignal,
): Promise<ScenarioInfoProbe> {
  const what = `the bench probe \`trajrl_bench.cli scenario-info --scenario ${scenario}\` of ${image}`;
  const out = await runProbe(
    docker,
    session,
    image,
    ["python", "-m", "trajrl_bench.cli", "scenario-info", "--scenario", scenario],
    what,
    signal,
  );
  const info = parseProbe(ScenarioInfoProbe, out, what);
  if (info.name !== scenario)
    throw new InfraError(
      "bench_probe_malformed",
      `${what} answered for scenario ${JSON.stringify(info.name)}`,
      {
        retryable: false,
      },
    );
  return info;
}
