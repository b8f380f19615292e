/**
 * src/precision.ts against CPython itself: python3 computes the expectations (`round(x, n)` and
 * `format(x, ".nf")`) for every fraction k/n with n ≤ 256, for sums of rounded scores as upstream's
 * `_summarize_eval` adds them, for every tie the wire can meet, and for random doubles of every
 * magnitude (fast-check, seeded). Doubles travel as JS's shortest round-trip strings, which
 * Python's float() reads back exactly.
 */
import { execFileSync } from "node:child_process";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { pyFixed6 as meterPyFixed6 } from "../../src/meter/admission.js";
import { pyFixed, pyFixed6, pyRound, pyRound6, round4 } from "../../src/precision.js";

/** One python3 run over many values: each line `x digits` → `repr(round(x, d))\tformat(x, ".df")`. */
function python(values: Array<{ x: number; digits: number }>): Array<{ round: number; fixed: string }> {
  const script = `
import sys
out = []
for line in sys.stdin.read().split("\\n"):
    if not line:
        continue
    s, d = line.split(" ")
    x, d = float(s), int(d)
    out.append(repr(round(x, d)) + "\\t" + format(x, "." + str(d) + "f"))
sys.stdout.write("\\n".join(out))
`;
  const input = values.map((v) => `${Object.is(v.x, -0) ? "-0.0" : String(v.x)} ${v.digits}`).join("\n");
  const stdout = execFileSync("python3", ["-c", script], {
    input,
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
  });
  return stdout.split("\n").map((line) => {
    const [r, fixed] = line.split("\t") as [string, string];
    return { round: pyFloat(r), fixed };
  });
}

function pyFloat(repr: string): number {
  if (repr === "inf") return Number.POSITIVE_INFINITY;
  if (repr === "-inf") return Number.NEGATIVE_INFINITY;
  if (repr === "nan") return Number.NaN;
  return Number(repr);
}

/** Compare every value with Python's answer; return the mismatches (empty = all agree). */
function mismatches(values: Array<{ x: number; digits: number }>): string[] {
  const py = python(values);
  const bad: string[] = [];
  values.forEach((v, i) => {
    const want = py[i]!;
    const gotRound = pyRound(v.x, v.digits);
    const gotFixed = pyFixed(v.x, v.digits);
    if (!Object.is(gotRound, want.round) || gotFixed !== want.fixed)
      bad.push(`${v.x} @${v.digits}: round ${gotRound} vs ${want.round}, fixed ${gotFixed} vs ${want.fixed}`);
  });
  return bad;
}

describe("Python's round(x, n) and f-format, exactly", () => {
  it("the examples the issue names: 1/32 → 0.0312, 3/160 → 0.0187 (half up gave 0.0313, 0.0188)", () => {
    expect(round4(1 / 32)).toBe(0.0312);
    expect(round4(3 / 160)).toBe(0.0187);
    expect(round4(3 / 32)).toBe(0.0938); // a tie whose even neighbour is above
    expect(pyFixed(1 / 32, 4)).toBe("0.0312");
    expect(pyRound6(1 / 128)).toBe(0.007812);
    expect(pyFixed6(1 / 128)).toBe("0.007812");
  });

  it("every k/n for 1 ≤ n ≤ 256, 0 ≤ k ≤ n, at 4 places (scores) and 6 (dollars) agrees with python3", () => {
    const values: Array<{ x: number; digits: number }> = [];
    const distinct = new Set<number>();
    for (let n = 1; n <= 256; n++)
      for (let k = 0; k <= n; k++) {
        distinct.add(k / n);
        values.push({ x: k / n, digits: 4 }, { x: k / n, digits: 6 });
      }
    expect(distinct.size).toBe(19_949);
    expect(mismatches(values)).toEqual([]);
  }, 120_000);

  it("the fractions where half-up-after-epsilon and Python disagree are exactly the ones fixed here", () => {
    const halfUp = (x: number) => Math.round((x + Number.EPSILON) * 10_000) / 10_000; // the old round4
    const differ: number[] = [];
    for (let n = 1; n <= 256; n++)
      for (let k = 0; k <= n; k++) if (halfUp(k / n) !== round4(k / n)) differ.push(k / n);
    const unique = [...new Set(differ)];
    const py = python(unique.map((x) => ({ x, digits: 4 })));
    expect(unique.map((x) => round4(x))).toEqual(py.map((p) => p.round));
    expect(unique.length).toBe(40); // the count issue 31 measured
  });

  it("a pack's score: each scenario rounded, summed left to right, the sum rounded (upstream's _summarize_eval)", () => {
    // Seeded sets of 1..26 scenario qualities k/n; Python adds the rounded scores with sum() and rounds.
    const sets = fc.sample(
      fc.array(
        fc.integer({ min: 1, max: 256 }).chain((n) => fc.integer({ min: 0, max: n }).map((k) => k / n)),
        { minLength: 1, maxLength: 26 },
      ),
      { seed: 31, numRuns: 3000 },
    );
    const script = `
import sys, json
out = []
for qs in json.loads(sys.stdin.read()):
    out.append(repr(round(sum(round(q, 4) for q in qs), 4)))
print(json.dumps(out))
`;
    const py = JSON.parse(
      execFileSync("python3", ["-c", script], { input: JSON.stringify(sets), encoding: "utf8" }),
    ) as string[];
    const bad: string[] = [];
    sets.forEach((qs, i) => {
      let sum = 0;
      for (const q of qs) sum += round4(q);
      if (round4(sum) !== Number(py[i])) bad.push(`${JSON.stringify(qs)}: ${round4(sum)} vs ${py[i]}`);
    });
    expect(bad).toEqual([]);
  });

  it("every exact tie at 4 places (odd multiples of 1/32) and at 6 (of 1/128) goes to the even neighbour", () => {
    const values: Array<{ x: number; digits: number }> = [];
    for (let j = 1; j < 20_000; j += 2) values.push({ x: j / 32, digits: 4 }, { x: -j / 32, digits: 4 });
    for (let j = 1; j < 20_000; j += 2) values.push({ x: j / 128, digits: 6 }, { x: -j / 128, digits: 6 });
    expect(mismatches(values)).toEqual([]);
  }, 120_000);

  it("random doubles of every magnitude and sign, subnormals, zeros and non-finite values agree with python3", () => {
    const doubles = fc.sample(fc.double(), { seed: 20261231, numRuns: 8000 });
    const unit = fc.sample(fc.double({ min: 0, max: 30, noNaN: true }), { seed: 7, numRuns: 8000 });
    const special = [
      0,
      -0,
      Number.MIN_VALUE,
      -Number.MIN_VALUE,
      Number.MAX_VALUE,
      1e21,
      1e21 - 65536,
      2 ** 53,
    ];
    const values = [...doubles, ...unit, ...special].flatMap((x) => [
      { x, digits: 4 },
      { x, digits: 6 },
      { x, digits: 0 },
    ]);
    expect(mismatches(values)).toEqual([]);
  }, 120_000);

  it("property: the decimal string and the double agree (round = the double nearest the rounded decimal)", () => {
    fc.assert(
      fc.property(
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.integer({ min: 0, max: 12 }),
        (x, d) => {
          const fixed = pyFixed(x, d);
          expect(Object.is(pyRound(x, d), x === 0 ? x : Number(fixed))).toBe(true);
          // The rounded decimal is within half a unit of the last place of the exact value.
          if (Math.abs(x) < 1e15)
            expect(Math.abs(Number(fixed) - x)).toBeLessThanOrEqual(0.5 * 10 ** -d + 1e-15 * Math.abs(x));
        },
      ),
      { seed: 4, numRuns: 5000 },
    );
  });

  it("the meter's header formatting is this one (one home, re-exported)", () => {
    expect(meterPyFixed6).toBe(pyFixed6);
  });
});
