/**
 * The takeover rule: a challenger unseats the incumbent only when
 * challenger > w · (1 + δ(s)), s = w / maxScore (DESIGN.md "Verdict and consensus").
 * δ is 3 % up to s = 0.70 and falls linearly to 0 at s = 1, so a perfect score can always take
 * the seat from an imperfect incumbent. Specs before 16 used a flat 3 %.
 */

export const TAKEOVER_BASE_DELTA = 0.03;
export const TAKEOVER_TAPER_FROM = 0.7;
/** First spec number with the tapering δ(s). */
export const TAKEOVER_TAPER_SPEC = 16;

/** The margin δ for an incumbent at fraction s of the maximum score. */
export function takeoverDelta(s: number, specNumber: number): number {
  if (specNumber < TAKEOVER_TAPER_SPEC) return TAKEOVER_BASE_DELTA;
  if (s <= TAKEOVER_TAPER_FROM) return TAKEOVER_BASE_DELTA;
  if (s >= 1) return 0;
  return (TAKEOVER_BASE_DELTA * (1 - s)) / (1 - TAKEOVER_TAPER_FROM);
}

export interface Takeover {
  takesOver: boolean;
  /** The score the challenger had to beat (strictly). */
  threshold: number;
  delta: number;
  /** s = incumbent / maxScore. */
  s: number;
}

export function takeoverThreshold(incumbent: number, maxScore: number, specNumber: number): Takeover {
  if (!(maxScore > 0)) throw new RangeError(`maxScore must be positive, got ${maxScore}`);
  const s = incumbent / maxScore;
  const delta = takeoverDelta(s, specNumber);
  // w + w·δ rather than w·(1+δ): near s = 1 the margin is below an ulp of w and must not
  // round the threshold up to a perfect score.
  return { takesOver: false, threshold: incumbent + incumbent * delta, delta, s };
}

/** Does the challenger's score take the seat from the incumbent's? Strict >. */
export function takeover(
  challenger: number,
  incumbent: number,
  maxScore: number,
  specNumber: number,
): Takeover {
  const t = takeoverThreshold(incumbent, maxScore, specNumber);
  return { ...t, takesOver: challenger > t.threshold };
}
