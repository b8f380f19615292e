/** Small formatters shared by the status page and the terminal summary. Pure. */

export function usd(x: number | null | undefined): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return "–";
  if (x === 0) return "$0";
  return x < 1 ? `$${x.toFixed(4)}` : `$${x.toFixed(2)}`;
}

export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "–";
  const s = Math.floor(ms / 1000);
  if (s < 60) return ms < 10_000 ? `${(ms / 1000).toFixed(1)}s` : `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, "0")}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h${String(m % 60).padStart(2, "0")}m`;
  return `${Math.floor(h / 24)}d${String(h % 24).padStart(2, "0")}h`;
}

/** "12s ago" relative to `now`; "–" for a missing time. */
export function ago(at: number | string | null | undefined, now: number): string {
  const t = typeof at === "string" ? Date.parse(at) : at;
  if (t === null || t === undefined || !Number.isFinite(t)) return "–";
  const d = now - t;
  return d < 0 ? "just now" : `${duration(d)} ago`;
}

export function isoOf(at: number | string | null | undefined): string {
  const t = typeof at === "string" ? Date.parse(at) : at;
  if (t === null || t === undefined || !Number.isFinite(t)) return "";
  return new Date(t).toISOString();
}

/** 5Gabc…wxyz: enough to recognise a hotkey, short enough for a table. */
export function shortKey(k: string | null | undefined): string {
  if (!k) return "–";
  return k.length > 14 ? `${k.slice(0, 6)}…${k.slice(-4)}` : k;
}

export function shortHash(h: string | null | undefined, n = 12): string {
  if (!h) return "–";
  return h.length > n ? h.slice(0, n) : h;
}

export function score(x: number | null | undefined): string {
  return x === null || x === undefined || !Number.isFinite(x)
    ? "–"
    : x.toFixed(4).replace(/\.?0+$/, "") || "0";
}

/** Weights as "uid 7: 100%" (the vector is normalised u16 or fractions; show shares). */
export function weightShares(uids: readonly number[], weights: readonly number[]): string {
  const total = weights.reduce((s, w) => s + w, 0);
  if (uids.length === 0 || total <= 0) return "–";
  const parts = uids.map((u, k) => ({ u, share: (weights[k] ?? 0) / total })).filter((p) => p.share > 0);
  parts.sort((a, b) => b.share - a.share);
  const shown = parts
    .slice(0, 3)
    .map((p) => `uid ${p.u}: ${(p.share * 100).toFixed(p.share === 1 ? 0 : 1)}%`)
    .join(", ");
  return parts.length > 3 ? `${shown}, +${parts.length - 3} more` : shown;
}

/**
 * Why the weights went where they went, in the operator's words (src/consensus/weights.ts
 * WeightsReason): where they first meet a burn or a copied row, the status page and `status`.
 */
export function weightsReasonText(reason: string | null | undefined): string {
  switch (reason) {
    case "winner":
      return "100 % to the platform's seated winner";
    case "owner_row":
      return "no winner seated: a copy of the subnet owner's weights (upstream's rule)";
    case "no_seat":
      return "no winner seated and the subnet owner's weights unreadable: burned to the owner's uid (upstream's rule; the chain burns what the owner's uid receives)";
    case "stale_winner_cache":
      return "the cached winner is older than WINNER_CACHE_TTL_S (the platform unreachable that long): burned to the owner's uid, as upstream";
    default:
      return reason ?? "–";
  }
}
