/**
 * Who is at fault when an episode does not end cleanly (CONVENTIONS.md): policy, upstream or
 * infra. Pure functions over facts gathered by the runner, so every rule is unit-tested.
 * A policy fault scores the episode from what was delivered; upstream and infra faults make the
 * episode "failed" so the evaluation layer retries or discards it, never costing the miner.
 */
import type { EpisodeFailure, KillReason } from "./types.js";

export type { KillReason } from "./types.js";

/** What a disk watchdog measured when it fired (bytes, or inodes: files, directories, links), and its bounds. */
export interface DiskOver {
  bytes?: number | undefined;
  inodes?: number | undefined;
  limitBytes: number;
  limitInodes: number;
}

/**
 * "N of M bytes", or "more than M files and directories" (the count stops at its bound), whichever
 * bound was passed (pure).
 */
export function diskOverText(d: DiskOver | undefined): string {
  if (d?.inodes !== undefined && d.inodes > d.limitInodes)
    return `more than ${d.limitInodes} files and directories`;
  return `${d?.bytes ?? "?"} of ${d?.limitBytes ?? "?"} bytes`;
}

export interface AgentEndFacts {
  killedBy?: KillReason;
  /** How the policy sidecar ended when it died under the running agent (killedBy "policy_exited"). */
  policyExit?: { exitCode: number; oomKilled: boolean };
  /**
   * The meter held a reservation (a call in flight upstream) when the agent was stopped. Logged;
   * it changes no attribution: upstream's watchdog counts completed calls only, and so does ours.
   */
  inflightAtKill?: boolean;
  /** killedBy "disk_limit": the layer's size and inodes when the disk watchdog fired, and the limits. */
  disk?: DiskOver;
  exitCode: number | undefined;
  oomKilled: boolean;
  /** From the agent's turns.jsonl summary line (absent after SIGKILL or a crash). */
  summaryReason?: string;
  summaryCode?: string;
  /** The last forwarded calls failed upstream (5xx, timeouts, cut streams). */
  upstreamFailing: boolean;
}

/** The minimal shape of a meter receipt the rules look at. */
export interface ReceiptFacts {
  status: number;
  upstream_status: number | null;
  truncated: boolean;
  error_code: string | null;
}

/**
 * How the meter ends a forwarded call when the provider did not: the episode closed or the meter
 * stopped under it, its client left or stopped reading, or its unread answers reached their bound.
 * Such a call says nothing of the provider (issue 36 item 6: a policy that leaves a call in flight
 * must not make the close's 503 read as the provider failing).
 */
const ENDED_BY_THE_METER: ReadonlySet<string> = new Set([
  "episode_closed",
  "meter_stopped",
  "client_disconnected",
  "client_not_reading",
  "answer_bytes_limit",
]);

/** The meter ended this call, not the provider (nor the model): it says nothing of either. */
export const endedByTheMeter = (r: ReceiptFacts) =>
  r.error_code !== null && ENDED_BY_THE_METER.has(r.error_code);

/** A receipt that shows the provider failing (not the policy, not the meter refusing or ending it). */
export function isUpstreamFailure(r: ReceiptFacts): boolean {
  if (endedByTheMeter(r)) return false;
  if (r.upstream_status !== null && r.upstream_status >= 500) return true;
  if (r.status === 502 || r.status === 503 || r.status === 504) return r.error_code !== null;
  return r.truncated && r.error_code !== null && /upstream|cut|timeout/i.test(r.error_code);
}

/**
 * The provider is failing when the most recent call it ended failed: refusals, and calls the meter
 * ended (endedByTheMeter), are not the provider's doing and are passed over.
 */
export function upstreamFailing(receipts: readonly ReceiptFacts[]): boolean {
  const providers = receipts.filter(
    (r) => r.status !== 400 && r.status !== 401 && r.status !== 402 && !endedByTheMeter(r),
  );
  const last = providers.at(-1);
  return last !== undefined && isUpstreamFailure(last);
}

export function attributeAgentEnd(f: AgentEndFacts): EpisodeFailure | undefined {
  if (f.killedBy === "policy_exited") {
    const exit = f.policyExit;
    return exit?.oomKilled
      ? {
          class: "policy",
          code: "policy_oom",
          message: "the policy sidecar ran out of memory while the agent ran (killed at its memory limit)",
        }
      : {
          class: "policy",
          code: "policy_crashed",
          message: `the policy sidecar exited with status ${exit?.exitCode ?? "?"} while the agent ran`,
        };
  }
  if (f.killedBy === "disk_limit")
    return {
      class: "policy",
      code: "agent_disk_limit",
      message: `the agent's container wrote past its disk limit (${diskOverText(f.disk)}); the disk watchdog killed it`,
    };
  if (f.killedBy === "deadline")
    return {
      class: "policy",
      code: "agent_timeout",
      message: "the agent ran out of time ([agent].timeout_sec)",
    };
  // Upstream's policy-stall watchdog: the policy's, whatever was in flight (a call that never
  // completes inside the window is the policy's choice of model and request as much as the
  // provider's), and the verifier grades what the agent wrote before it was stopped.
  if (f.killedBy === "watchdog_no_call" || f.killedBy === "watchdog_idle")
    return {
      class: "policy",
      code: "policy_stalled",
      message:
        f.killedBy === "watchdog_no_call"
          ? "no metered call completed within the first-call window after the agent started; the agent was stopped"
          : "no metered call completed within the idle window; the agent was stopped",
    };
  switch (f.summaryReason) {
    case "completed":
    case "max_turns":
    case "budget_exhausted":
      return undefined;
    case "llm_error":
      return f.upstreamFailing
        ? {
            class: "upstream",
            code: "upstream_errors",
            message: `the provider failed (${f.summaryCode ?? "llm_error"})`,
          }
        : {
            class: "policy",
            code: "policy_errors",
            message: `the policy answered the agent with errors (${f.summaryCode ?? "llm_error"})`,
          };
    case "internal_error":
    case "config_error":
      return {
        class: "infra",
        code: "agent_crashed",
        message: `the agent failed: ${f.summaryReason} ${f.summaryCode ?? ""}`.trim(),
      };
    case "signal":
      return {
        class: "infra",
        code: "agent_signalled",
        message: `the agent was signalled (${f.summaryCode ?? "?"})`,
      };
    default:
      break;
  }
  if (f.oomKilled)
    return { class: "policy", code: "agent_oom", message: "the scenario container ran out of memory" };
  // An agent that exits 0 ended normally, whether or not it writes our summary line (an
  // operator's own agent image may not).
  if (f.exitCode === 0) return undefined;
  return {
    class: "infra",
    code: "agent_crashed",
    message: `the agent died (exit ${f.exitCode ?? "?"}) without a summary`,
  };
}

/**
 * The episode's outcome from every failure seen, in order: an upstream or infra fault wins (the
 * score would not be trustworthy), else the first policy fault; none → a clean episode.
 */
export function primaryFailure(failures: readonly EpisodeFailure[]): EpisodeFailure | undefined {
  return failures.find((f) => f.class !== "policy") ?? failures[0];
}
