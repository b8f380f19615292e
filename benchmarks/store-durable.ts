/**
 * What synchronous=FULL costs the votes (src/store `durably`):
 *   npx tsx benchmarks/store-durable.ts [--verdicts 300] [--rounds 3] [--dir /path/on/the/data/disk]
 *
 * One verdict's life in the outbox is three commits: enqueue (with the scored-epoch mark), the
 * attempt count, the delivery. "full" runs them through the repositories as they are (each commit
 * fsyncs the WAL); "normal" runs the very same code on a connection that ignores the switch to FULL
 * (what every write did before). Same disk, alternating rounds; per-commit latency percentiles.
 * Point --dir at the filesystem DATA_DIR lives on: on a tmpfs an fsync costs nothing.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Db, openDb, VerdictOutboxRepo } from "../src/store/index.js";

const arg = (name: string, dflt: string) => {
  const k = process.argv.indexOf(`--${name}`);
  return k > 0 ? process.argv[k + 1]! : dflt;
};
const VERDICTS = Number(arg("verdicts", "300"));
const ROUNDS = Number(arg("rounds", "3"));
const base = mkdtempSync(join(arg("dir", tmpdir()), "bench-durable-"));

/** A connection where `durably`'s switch to FULL does nothing: the pre-change behaviour, same code. */
function normalOnly(db: Db): Db {
  const pragma = db.pragma.bind(db);
  db.pragma = ((source: string, options?: { simple?: boolean }) =>
    /^synchronous\s*=\s*FULL$/i.test(source.trim()) ? undefined : pragma(source, options)) as Db["pragma"];
  return db;
}

function run(mode: "full" | "normal", round: number): number[] {
  const path = join(base, `${mode}-${round}.sqlite`);
  const db = openDb(path);
  if (mode === "normal") normalOnly(db);
  const outbox = new VerdictOutboxRepo(db, `0x${"ab".repeat(32)}`);
  const lat: number[] = [];
  const time = (f: () => unknown) => {
    const t = performance.now();
    f();
    lat.push(performance.now() - t);
  };
  for (let i = 1; i <= VERDICTS; i++) {
    let id = 0;
    time(() => {
      id = outbox.enqueue({
        epochId: i,
        validatorHotkey: "5Bench",
        verdict: {
          spec_number: 27,
          challenger: { score: 12.5, qualified: true, scenario_results: { a: { score: 1 } } },
        },
        nowMs: i,
      }).entry.id;
    });
    time(() => outbox.markAttempt(id, i));
    time(() => outbox.apply(id, { state: "delivered", outcome: "delivered", reason: null }, i, 200));
  }
  db.close();
  return lat;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const fmt = (x: number) => x.toFixed(3);

const all: Record<"full" | "normal", number[]> = { full: [], normal: [] };
try {
  for (let r = 0; r < ROUNDS; r++)
    for (const mode of r % 2 === 0 ? (["normal", "full"] as const) : (["full", "normal"] as const))
      all[mode].push(...run(mode, r));
  console.log(`${ROUNDS} rounds × ${VERDICTS} verdicts × 3 commits, on ${base}`);
  console.log("mode     commits   p50 ms   p95 ms   p99 ms   mean ms   per verdict ms");
  for (const mode of ["normal", "full"] as const) {
    const xs = all[mode];
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
    console.log(
      `${mode.padEnd(8)} ${String(xs.length).padStart(7)} ${fmt(pct(xs, 50)).padStart(8)} ${fmt(pct(xs, 95)).padStart(8)} ${fmt(pct(xs, 99)).padStart(8)} ${fmt(mean).padStart(9)} ${fmt(mean * 3).padStart(16)}`,
    );
  }
} finally {
  rmSync(base, { recursive: true, force: true });
}
