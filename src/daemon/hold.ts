/**
 * A start the daemon refuses is held, not exited: the process stays up, says why (the `start_held`
 * alarm: the status page, /healthz and /readyz, `status`'s first lines, one log line per reason), and
 * tries again — soon when the cause may pass by itself (a local chain not answering yet), every 30 s
 * otherwise (a wallet, the chain's network, Docker). A supervisor that restarts exited processes
 * (compose's `restart: unless-stopped`) would otherwise loop on a mistake only the operator can fix.
 * The same rule as the image's entrypoint, which holds a wallet it cannot read (docker/README.md).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { toValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import type { LiveStatus } from "../status/index.js";
import type { Daemon } from "./daemon.js";
import { ALARM } from "./eval-loop.js";

/** Refusals that come from a setting: the process reads its settings once, so only a restart with the fix clears them. */
const SETTING_REFUSALS: ReadonlySet<string> = new Set([
  "offline_override_on_subnet",
  "strict_provenance_on_subnet",
  "llm_key_missing_on_subnet",
  "builtin_bench_on_subnet",
]);

export const HOLD_RECHECK_MS = { refusal: 30_000, transient: 5_000 } as const;

export interface HeldStart {
  code: string;
  message: string;
}

export interface StartOrHoldOptions {
  /** A fresh daemon for each attempt (a Daemon starts once). */
  makeDaemon(): Daemon;
  live: LiveStatus;
  log: Logger;
  /** Aborted: stop holding (SIGTERM); the pending attempt's daemon is the caller's to stop. */
  signal: AbortSignal;
  /** Each time a start is refused, before the wait (the status page goes up on the first). */
  onHold?(held: HeldStart): Promise<void>;
  recheckMs?: { refusal: number; transient: number };
}

/** Pure: what the status page and the log say about a held start. */
export function holdMessage(code: string, message: string, recheckMs: number): string {
  const again = SETTING_REFUSALS.has(code)
    ? "a setting is read once, at start: fix it and restart the validator (compose: `up -d` after editing .env.validator)"
    : `checked again every ${Math.round(recheckMs / 1000)} s; it starts by itself once this is fixed`;
  return `the daemon holds its start (${code}): ${message} — ${again}`;
}

/** Start a daemon; while its start is refused, hold and try again. Undefined when stopped while holding. */
export async function startOrHold(o: StartOrHoldOptions): Promise<Daemon | undefined> {
  const waits = o.recheckMs ?? HOLD_RECHECK_MS;
  let said = "";
  for (let attempt = 1; !o.signal.aborted; attempt++) {
    const daemon = o.makeDaemon();
    try {
      await daemon.start();
      if (attempt > 1) {
        o.live.clear(ALARM.startHeld);
        o.log.info({ attempts: attempt }, "daemon.hold_released");
      }
      return daemon;
    } catch (err) {
      if (o.signal.aborted) return undefined;
      const e = toValidatorError(err);
      const waitMs = e.retryable ? waits.transient : waits.refusal;
      const message = holdMessage(e.code, e.message, waitMs);
      o.live.raise(ALARM.startHeld, message, "error");
      if (`${e.code}:${e.message}` !== said)
        o.log.error({ code: e.code, err: e.message, recheckS: waitMs / 1000 }, "daemon.start_held");
      said = `${e.code}:${e.message}`;
      await o.onHold?.({ code: e.code, message });
      await sleep(waitMs, undefined, { signal: o.signal }).catch(() => undefined);
    }
  }
  return undefined;
}
