/**
 * Names in an environment that look like one of this validator's settings but are not (a typo
 * such as `EVAL_ENABLE`, a lower-case `eval_enabled`, a made-up `LLM_KEY`): read by nothing, so the
 * setting the operator meant keeps its default without a word. Pure; src/config.ts turns each into
 * a warning with a "did you mean".
 */

/** Names this project reads outside the settings table (the image's entrypoint, debugging, ssh). */
const OTHER_KNOWN = new Set([
  "TRAJRL_DEBUG",
  "TRAJRL_HOST_WALLETS_DIR",
  "TRAJRL_IMAGE",
  "TRAJRL_AUTO_UPDATE",
  "VALIDATOR_UID",
  "VALIDATOR_GID",
  "SSH_AUTH_SOCK",
]);

/**
 * First words that only this project's settings use: a name starting with one of them is meant for
 * this validator. Generic words (DATA_, LOG_, DOCKER_, NODE_) are left out: other software sets those.
 */
const OWN_PREFIXES = [
  "EVAL_",
  "LLM_",
  "ENGY_",
  "METER_",
  "WALLET_",
  "WEIGHTS_",
  "TRAJECTORYRL_",
  "HEARTBEAT_",
  "WINNER_",
  "BENCH_",
  "EPISODE_",
  "SUBTENSOR_",
  "SUBNET_",
  "OFFLINE_",
  "DEGRADED_",
  "VERIFIER_",
  "TRAJRL_",
  "JUDGE_",
];

/** Optimal string alignment distance (Levenshtein plus adjacent transpositions). */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  return d[a.length]![b.length]!;
}

export interface NearMiss {
  name: string;
  /** The setting it most likely meant, when one is close enough to name. */
  suggestion: string | undefined;
}

/** The closest known name within `max` edits (ties: the first in `known`'s order). */
function closest(name: string, known: readonly string[], max: number): string | undefined {
  let best: { k: string; d: number } | undefined;
  for (const k of known) {
    const d = editDistance(name, k);
    if (d <= max && (best === undefined || d < best.d)) best = { k, d };
  }
  return best?.k;
}

/**
 * The names of `env` that look meant for this validator and that it does not read, in `env`'s
 * order: a known name in another case, one within two edits of a known name (of 6 or more
 * characters), or a name under one of the project's own prefixes (then the suggestion is the
 * closest setting under the same prefix, if any is within half the name's length).
 */
export function nearMissNames(env: Record<string, string | undefined>, known: readonly string[]): NearMiss[] {
  const knownSet = new Set([...known, ...OTHER_KNOWN]);
  const long = known.filter((k) => k.length >= 6);
  const out: NearMiss[] = [];
  for (const name of Object.keys(env)) {
    if (knownSet.has(name)) continue;
    const upper = name.toUpperCase();
    if (knownSet.has(upper)) {
      if (known.includes(upper)) out.push({ name, suggestion: upper });
      continue;
    }
    const near = name.length >= 5 ? closest(upper, long, 2) : undefined;
    if (near) out.push({ name, suggestion: near });
    else {
      const prefix = OWN_PREFIXES.find((p) => upper.startsWith(p));
      if (prefix === undefined) continue;
      const sameWord = known.filter((k) => k.startsWith(prefix));
      out.push({ name, suggestion: closest(upper, sameWord, Math.ceil(upper.length / 2)) });
    }
  }
  return out;
}
