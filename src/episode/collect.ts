/**
 * After the agent: everything it left (session files, logs, the one deliverable) copied out of
 * its container, the meter token closed (nothing may be billed afterwards), and how the agent
 * ended attributed to policy, upstream or infra.
 */
import { parseTurnsJsonl, type TurnRecord } from "../../agent/contract.js";
import { type Container, type FetchedPath, getPath, inspectContainer, readLogs } from "../sandbox/index.js";
import { type AgentRun, TRANSCRIPT_PATH, TURNS_PATH } from "./agent.js";
import { ARTIFACT_FILES } from "./artifacts.js";
import { type AgentEndFacts, attributeAgentEnd, upstreamFailing } from "./attribution.js";
import type { EpisodeRun } from "./run-context.js";
import type { Sidecar } from "./sidecar.js";

const DELIVERABLE_CAP = 64 * 1024 * 1024;

function text(p: FetchedPath): string | undefined {
  return p.kind === "file" ? p.data.toString("utf8") : undefined;
}

const noLogs = { stdout: "", stderr: "", truncated: false };

function joinLogs(l: { stdout: string; stderr: string }): string {
  return `${l.stdout}${l.stderr ? `\n--- stderr ---\n${l.stderr}` : ""}`;
}

export interface Collected {
  deliverable: FetchedPath;
  turns: TurnRecord[] | undefined;
  policyLog: string;
  /** The sidecar was killed from outside while the agent ran (infra). */
  sidecarKilled: boolean;
}

export async function collectAgent(
  run: EpisodeRun,
  agent: Container,
  sidecar: Sidecar,
  ended: AgentRun,
): Promise<Collected> {
  const [info, turns, transcript, agentLogs, deliverable, sidecarLogs] = await Promise.all([
    inspectContainer(agent),
    getPath(agent, TURNS_PATH, 32 * 1024 * 1024),
    getPath(agent, TRANSCRIPT_PATH, 8 * 1024 * 1024),
    readLogs(agent, 1024 * 1024).catch(() => noLogs),
    getPath(agent, run.scenario.task.verifier.agent_output_path, DELIVERABLE_CAP),
    readLogs(sidecar.container, 4 * 1024 * 1024).catch(() => noLogs),
  ]);
  // Nothing may be billed after the agent is done.
  run.closeToken();
  const sidecarKilled = run.sandbox.engineWatch.killsOf(sidecar.name) > 0;
  if (sidecarKilled)
    run.fail({
      class: "infra",
      code: "sidecar_killed",
      message: "the policy sidecar was killed from outside while the agent ran",
    });

  const turnsText = text(turns);
  const parsed = turnsText !== undefined ? parseTurnsJsonl(turnsText) : undefined;
  const result = run.result;
  result.agent = {
    exit_code: ended.killedBy ? null : (ended.exitCode ?? info.State.ExitCode),
    end_reason: parsed?.summary?.reason ?? null,
    end_code: parsed?.summary?.code ?? null,
    turns: parsed?.summary?.turns ?? parsed?.turns.length ?? 0,
    tool_calls:
      parsed?.summary?.tool_call_count ??
      parsed?.turns.reduce((n, t) => n + (t.tool_call_count ?? 0), 0) ??
      0,
    killed_by: ended.killedBy ?? null,
  };
  await Promise.all([
    run.artifacts.write(ARTIFACT_FILES.turns, turnsText),
    run.artifacts.write(ARTIFACT_FILES.transcript, text(transcript) || agentLogs.stdout),
    run.artifacts.write(ARTIFACT_FILES.agentLog, joinLogs(agentLogs)),
  ]);
  const facts: AgentEndFacts = {
    exitCode: result.agent.exit_code ?? undefined,
    oomKilled: Boolean(info.State.OOMKilled),
    upstreamFailing: upstreamFailing(run.receipts()),
    inflightAtKill: ended.inflightAtKill,
  };
  if (ended.killedBy) facts.killedBy = ended.killedBy;
  if (ended.policyExit) facts.policyExit = ended.policyExit;
  if (parsed?.summary?.reason) facts.summaryReason = parsed.summary.reason;
  if (parsed?.summary?.code) facts.summaryCode = parsed.summary.code;
  // (A sidecar killed from outside ended the agent: that is the whole story, not a policy crash.)
  const agentFailure =
    ended.killedBy === "policy_exited" && sidecarKilled ? undefined : attributeAgentEnd(facts);
  if (agentFailure) run.fail(agentFailure);
  if (parsed?.summary?.reason === "budget_exhausted") result.notes.push("budget_exhausted");
  return { deliverable, turns: parsed?.turns, policyLog: joinLogs(sidecarLogs), sidecarKilled };
}
