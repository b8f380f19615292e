/**
 * The static scan of policy files against upstream's `scan_policy_files`: upstream's own test
 * (tests/test_policy.py `test_scan_policy_files_flags_dispatch_and_blobs`) with its vectors, then
 * vectors for each rule's edge, whose expected numbers are what upstream's function returns for them.
 */
import { describe, expect, it } from "vitest";
import {
  compareCodePoints,
  judgePolicyScan,
  PolicyScanUnencodable,
  scanPolicyFiles,
} from "../../src/policy/index.js";

const NAMES = ["git-leak-recovery", "postgres-csv-clean", "puzzle-solver"];

describe("scanPolicyFiles: upstream's test", () => {
  it("flags scenario-name dispatch and base64 blobs, not generic routing", () => {
    const clean = { "policy.py": "req['model'] = 'glm-5.3-flash' if 'git' in txt else 'kimi-k3'" };
    const r = scanPolicyFiles(clean, NAMES);
    expect(r.scenario_hits).toBe(0);
    expect(r.b64_blobs).toBe(0);
    const bad = {
      "policy.py": `TABLE = {'git-leak-recovery': 'kimi-k3', 'puzzle-solver': 'glm-5.3'}\nPAYLOAD = '${"QUJD".repeat(60)}'\nMSG = 'x' * 1`,
    };
    const b = scanPolicyFiles(bad, NAMES);
    expect(b.scenario_hits).toBe(2);
    expect(new Set(b.scenario_names)).toEqual(new Set(["git-leak-recovery", "puzzle-solver"]));
    expect(b.b64_blobs).toBe(1);
    expect(b.long_literals).toBeGreaterThanOrEqual(1);
  });

  it("returns exactly what upstream returns on those vectors", () => {
    expect(
      scanPolicyFiles(
        { "policy.py": "req['model'] = 'glm-5.3-flash' if 'git' in txt else 'kimi-k3'" },
        NAMES,
      ),
    ).toEqual({ scenario_hits: 0, scenario_names: [], long_literals: 0, b64_blobs: 0, bytes: 61 });
    const bad = `TABLE = {'git-leak-recovery': 'kimi-k3', 'puzzle-solver': 'glm-5.3'}\nPAYLOAD = '${"QUJD".repeat(60)}'\nMSG = 'x' * 1`;
    expect(scanPolicyFiles({ "policy.py": bad }, NAMES)).toEqual({
      scenario_hits: 2,
      scenario_names: ["git-leak-recovery", "puzzle-solver"],
      long_literals: 1,
      b64_blobs: 1,
      bytes: 335,
    });
  });
});

describe("scanPolicyFiles: each rule's edge", () => {
  it("counts a base64 run of 200+ only when Python's b64decode accepts it (not 1 more than a multiple of 4)", () => {
    const files = {
      a: "A".repeat(199),
      b: "A".repeat(200),
      c: "A".repeat(201),
      d: `${"A".repeat(201)}==`,
      e: `${"A".repeat(202)}=`,
      f: `${"A".repeat(203)}==`,
      g: `${"A".repeat(204)}===`,
      h: `${"+/".repeat(150)} ${"9".repeat(205)}`,
    };
    expect(scanPolicyFiles(files, [])).toEqual({
      scenario_hits: 0,
      scenario_names: [],
      long_literals: 0,
      b64_blobs: 5,
      bytes: 1931,
    });
  });

  it("counts long literals on one line, by code points, either quote, without overlap", () => {
    const line = `'${"a".repeat(41)}' "${"b".repeat(40)}" 'short' 'a${"é".repeat(39)}'\n'${"a".repeat(20)}\n${"a".repeat(23)}' '${"a".repeat(39)}\raaa'`;
    expect(scanPolicyFiles({ "p.py": line }, [])).toMatchObject({ long_literals: 4, bytes: 269 }); // "\r" is not a line end for Python's "."
    // 40 emoji are 40 characters for Python (80 UTF-16 units): a literal; 39 are not.
    expect(scanPolicyFiles({ "p.py": `x = '${"😀".repeat(40)}'` }, [])).toMatchObject({
      long_literals: 1,
      bytes: 166,
    });
    expect(scanPolicyFiles({ "p.py": `x = '${"😀".repeat(39)}'` }, []).long_literals).toBe(0);
  });

  it("matches scenario names case-insensitively, in the order given, duplicates and the empty name included", () => {
    expect(scanPolicyFiles({ "p.py": 'x = "' }, ["P.PY", "x = ", "", "x"])).toEqual({
      scenario_hits: 3,
      scenario_names: ["x = ", "", "x"],
      long_literals: 0,
      b64_blobs: 0,
      bytes: 5,
    });
    expect(
      scanPolicyFiles({ "p.py": "NAME='Git-Leak-Recovery'  # \u212a" }, ["git-leak-recovery", "k", "K"]),
    ).toEqual({
      scenario_hits: 3,
      scenario_names: ["git-leak-recovery", "k", "K"],
      long_literals: 0,
      b64_blobs: 0,
      bytes: 31,
    });
    expect(scanPolicyFiles({ "p.py": "x" }, ["\u0130"]).scenario_hits).toBe(0);
    const many = Array.from({ length: 12 }, (_, i) => `scenario-${String(i).padStart(2, "0")}`);
    const r = scanPolicyFiles({ "p.py": many.join(" ") }, many);
    expect(r.scenario_hits).toBe(12);
    expect(r.scenario_names).toEqual(many.slice(0, 10));
  });

  it("joins the files with newlines in Python's key order, so nothing spans two files", () => {
    const r = scanPolicyFiles({ b: `'${"x".repeat(20)}`, a: `${"y".repeat(20)}'` }, []);
    expect(r).toEqual({ scenario_hits: 0, scenario_names: [], long_literals: 0, b64_blobs: 0, bytes: 43 });
    expect(
      scanPolicyFiles(
        { "b.txt": "B", "a.txt": "A", "é.txt": "e", "😀.txt": "smile", "\uffff.txt": "ffff" },
        [],
      ).bytes,
    ).toBe(16);
    const keys = ["😀", "\uffff", "é", "Z", "a", ""];
    expect([...keys].sort(compareCodePoints)).toEqual(["", "Z", "a", "é", "\uffff", "😀"]);
    expect([...keys].sort()).not.toEqual([...keys].sort(compareCodePoints)); // UTF-16 order differs
  });

  it("throws where upstream's scan raises: a lone surrogate cannot be encoded as UTF-8", () => {
    expect(() => scanPolicyFiles({ "p.py": "x = '\ud800'" }, [])).toThrow(PolicyScanUnencodable);
    expect(scanPolicyFiles({ "p.py": "😀" }, []).bytes).toBe(4);
  });
});

describe("judgePolicyScan", () => {
  it("is null for a pack without policy files, as upstream's judge entry (`policy_scan or None`)", () => {
    expect(judgePolicyScan({}, NAMES)).toBeNull();
    expect(judgePolicyScan({ "policy.json": '{"kind": "pin"}' }, NAMES)).toEqual({
      scenario_hits: 0,
      scenario_names: [],
      long_literals: 0,
      b64_blobs: 0,
      bytes: 15,
    });
  });
});
