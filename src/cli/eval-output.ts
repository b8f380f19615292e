/**
 * What `eval` prints and writes besides the progress view: the bench's image lines, each verdict's
 * evidence (src/evidence: signed, under <DATA_DIR or --out>/evidence/), and at the end the JSON or
 * the leaderboard, the HTML report and the exit code.
 */
import { mkdirSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { Environment } from "../environment/index.js";
import type { EvaluationResult } from "../evaluation/index.js";
import type { EvidenceSigner } from "../evidence/index.js";
import type { Logger } from "../log.js";
import { out } from "./io.js";

export interface EvalResult {
  label: string;
  result: EvaluationResult;
  evidence?: { id: string; path: string };
}

/** The bench's image builds and pulls, one line each (never the per-layer progress). */
export function benchProgressPrinter(say: (line: string) => void, registry: boolean) {
  const seen = new Set<string>();
  return (p: { image: string; ref: string; phase: string; ms?: number; note?: string }) => {
    if (p.phase === "pulling" || seen.has(`${p.image}:${p.phase}`)) return;
    seen.add(`${p.image}:${p.phase}`);
    if (p.phase === "ready") say(`  ${registry ? "pulled" : "built"} image ${p.image} (${p.ref})`);
    if (p.phase === "fallback") say(`  WARNING: pulling ${p.ref} failed (${p.note}); using the cached image`);
  };
}

/**
 * A verdict's evidence, written and said where it is; a failure to write it is said and logged,
 * never the verdict's failure (the verdict is in SQLite either way).
 */
export async function writeEvalEvidence(
  env: Environment,
  r: EvaluationResult,
  o: { signer: EvidenceSigner; dir: string; log: Logger; say: (line: string) => void },
): Promise<{ id: string; path: string } | undefined> {
  if (r.kind !== "verdict") return undefined;
  const [{ recordEvidence }, { toScoreVerdict }] = await Promise.all([
    import("../evidence/index.js"),
    import("../evaluation/index.js"),
  ]);
  try {
    const rec = await recordEvidence({
      db: env.db,
      evaluationId: r.evaluationId,
      payload: toScoreVerdict(r.verdict),
      context: { packHash: r.verdict.packHash, epochId: null, source: "local" },
      signer: o.signer,
      dir: o.dir,
      log: o.log,
    });
    o.say(`  evidence: ${rec.path}`);
    return { id: rec.id, path: rec.path };
  } catch (err) {
    o.log.error({ evaluation: r.evaluationId, err: (err as Error).message }, "evidence.failed");
    o.say(`  WARNING: the evidence could not be written: ${(err as Error).message}`);
    return undefined;
  }
}

/** The end of `eval`: JSON (each verdict with its payload and evidence) or the leaderboard, the report, the exit code. */
export async function finishEval(
  results: readonly EvalResult[],
  o: {
    json: boolean;
    aborted: boolean;
    say: (line: string) => void;
    reportPath: string;
  },
): Promise<void> {
  const { toScoreVerdict, leaderboard, renderReport } = await import("../evaluation/index.js");
  const verdicts = results.flatMap((r) =>
    r.result.kind === "verdict"
      ? [{ label: r.label, verdict: r.result.verdict, ...(r.evidence ? { evidence: r.evidence } : {}) }]
      : [],
  );
  const scored = verdicts.filter((v) => !v.verdict.rejected);
  if (o.json) {
    // Each verdict with the body a validator posts for it (upstream's score payload) and its evidence.
    const body = results.map((r) => ({
      label: r.label,
      ...r.result,
      ...(r.result.kind === "verdict" ? { payload: toScoreVerdict(r.result.verdict) } : {}),
      ...(r.evidence ? { evidence: r.evidence } : {}),
    }));
    out(JSON.stringify(body, null, 2));
  } else if (scored.length > 1) o.say(`\nleaderboard\n${leaderboard(scored)}`);
  if (scored.length > 0) {
    mkdirSync(resolve(o.reportPath, ".."), { recursive: true });
    await writeFile(
      o.reportPath,
      renderReport(scored, { title: `Evaluation of ${scored.map((v) => v.label).join(", ")}` }),
    );
    o.say(`report: ${o.reportPath}`);
  }
  if (o.aborted) process.exitCode = 130;
  else if (results.some((r) => r.result.kind !== "verdict" || r.result.verdict.rejected))
    process.exitCode = 1;
}

/** report.html under --out, else DATA_DIR/reports/eval-<stamp>.html. */
export function reportPathOf(outDir: string | undefined, dataDir: string, stamp: string): string {
  return outDir ? join(outDir, "report.html") : join(dataDir, "reports", `eval-${stamp}.html`);
}
