/**
 * The score a grader's report gives, re-derived offline from the evidence with the episode's own
 * rules (src/episode: the harness and files contracts of the built-in suite, upstream's rules for
 * the registry bench). Pure.
 */
import { ctrfCorrectness, parseCtrf, parseReward, rewardOf, scoreOf } from "../episode/index.js";
import type { GradingRecordJson } from "./manifest.js";

function parsedJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The quality the report in hand gives; undefined when it cannot be told (not graded, or the
 * report the rule needs is not in the evidence). A grading that failed (a timeout, a killed or
 * disagreeing grader) gave no score: 0.
 */
export function reportQuality(g: GradingRecordJson, ctrfText: string | undefined): number | undefined {
  if (!g.graded || !g.grade) return undefined;
  if (g.grade.failure !== null) return 0;
  const reward = g.report.reward_text;
  switch (g.grader) {
    case "harness": {
      if (ctrfText === undefined) return undefined;
      const c = parseCtrf(ctrfText);
      return c.ok && c.value.tests > 0 ? c.value.passed / c.value.tests : 0;
    }
    case "files": {
      if (ctrfText === undefined && reward === null) return 0;
      const c = ctrfText === undefined ? undefined : parseCtrf(ctrfText);
      if (c === undefined && g.grade.tests > 0) return undefined;
      const r = reward === null ? undefined : parseReward(reward);
      return scoreOf(c?.ok ? c.value : undefined, r?.ok ? r.value : undefined)?.quality ?? 0;
    }
    case "bench": {
      // Upstream: no reward.txt → 0 (ctrf.json is then not read).
      if (reward === null) return 0;
      if (ctrfText === undefined && g.grade.tests > 0) return undefined;
      const { passed, total } = ctrfCorrectness(ctrfText === undefined ? undefined : parsedJson(ctrfText));
      return total > 0 ? passed / total : rewardOf(reward);
    }
  }
}
