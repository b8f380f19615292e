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
import { type HermesAgent, postMortemExport } from "./hermes-agent.js";
import { type HermesAnswer, incompleteNoProgress, parseHermesSession } from "./hermes-session.js";
import type { EpisodeRun } from "./run-context.js";
import type { Sidecar } from "./sidecar.js";

export const DELIVERABLE_CAP = 64 * 1024 * 1024;

function text(p: FetchedPath): string | undefined {
  return p.kind === "file" ? p.data.toString("utf8") : undefined;
}

const noLogs = { stdout: "", stderr: "", truncated: false };

function joinLogs(l: { stdout: string; stderr: string }): string {
  return `${l.stdout}${l.stderr ? `\n--- stderr ---\n${l.stderr}` : ""}`;
}

export interface Collected {
  deliverable: FetchedPath;
  /** The built-in agent's turns (our format), for the strict provenance check. */
  turns: TurnRecord[] | undefined;
  /** Every answer the agent recorded, as upstream's provenance reads them. */
  answers: HermesAnswer[];
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
  return {
    deliverable,
    turns: parsed?.turns,
    answers: (parsed?.turns ?? []).flatMap((t): HermesAnswer[] => {
      const m = t.messages[0];
      if (m?.role !== "assistant") return [];
      return [
        {
          index: t.turn,
          content: m.content ?? "",
          toolCalls: t.tool_calls.map((c) => ({ name: c.name, arguments: c.arguments_raw })),
          finishReason: t.finish_reason,
        },
      ];
    }),
    policyLog: joinLogs(sidecarLogs),
    sidecarKilled,
  };
}

/**
 * After Hermes (trajrl-bench): the session export (a post-mortem export when the kill left none),
 * the export's error file, the transcript the chat printed, the deliverable; then the token is
 * closed. Upstream attributes nothing to Hermes' own exit status (a provider failing every call is
 * judged over the whole session); kills by deadline, watchdog or a dead policy are the policy's.
 */
export async function collectHermes(
  run: EpisodeRun,
  agent: HermesAgent,
  sidecar: Sidecar,
  ended: AgentRun,
): Promise<Collected> {
  const c = agent.container;
  let turns = await getPath(c, TURNS_PATH, 32 * 1024 * 1024);
  if (ended.killedBy && (turns.kind !== "file" || turns.data.length === 0)) {
    await postMortemExport(c);
    turns = await getPath(c, TURNS_PATH, 32 * 1024 * 1024);
  }
  const [exportErr, agentLogs, deliverable, sidecarLogs, policyLog] = await Promise.all([
    getPath(c, "/workspace/turns_export.err", 1024 * 1024),
    readLogs(c, 1024 * 1024).catch(() => noLogs),
    getPath(c, run.scenario.task.verifier.agent_output_path, DELIVERABLE_CAP),
    readLogs(sidecar.container, 4 * 1024 * 1024).catch(() => noLogs),
    sidecar.policyLogTail(),
  ]);
  run.closeToken();
  const sidecarKilled = run.sandbox.engineWatch.killsOf(sidecar.name) > 0;
  if (sidecarKilled)
    run.fail({
      class: "infra",
      code: "sidecar_killed",
      message: "the policy sidecar was killed from outside while the agent ran",
    });
  const turnsText = text(turns);
  const session = parseHermesSession(turnsText ?? "");
  const chatExit = ended.killedBy ? null : agent.chatExit();
  run.result.agent = {
    exit_code: chatExit,
    end_reason: ended.killedBy ? "killed" : chatExit === 0 ? "completed" : chatExit === null ? null : "error",
    end_code: chatExit !== null && chatExit !== 0 ? `hermes_exit_${chatExit}` : null,
    turns: session.answers.length,
    tool_calls: session.toolCallCount,
    killed_by: ended.killedBy ?? null,
  };
  await Promise.all([
    run.artifacts.write(ARTIFACT_FILES.turns, turnsText),
    run.artifacts.write(ARTIFACT_FILES.transcript, agent.transcript()),
    run.artifacts.write(
      ARTIFACT_FILES.agentLog,
      `${joinLogs(agentLogs)}${exportErr.kind === "file" ? `\n--- turns_export.err ---\n${exportErr.data.toString("utf8")}` : ""}`,
    ),
  ]);
  if (ended.killedBy && !(ended.killedBy === "policy_exited" && sidecarKilled)) {
    const f = attributeAgentEnd({
      killedBy: ended.killedBy,
      ...(ended.policyExit ? { policyExit: ended.policyExit } : {}),
      inflightAtKill: ended.inflightAtKill,
      exitCode: undefined,
      oomKilled: false,
      upstreamFailing: upstreamFailing(run.receipts()),
    });
    if (f) run.fail(f);
  } else if (chatExit !== null && chatExit !== 0) {
    run.result.notes.push(`hermes_exit_${chatExit}`);
  }
  run.result.truncated_before_tool_call = incompleteNoProgress(
    session,
    chatExit,
    ended.killedBy === "deadline",
  );
  return {
    deliverable,
    turns: undefined,
    answers: session.answers,
    policyLog: `${policyLog}${policyLog ? "\n" : ""}--- stdout/stderr ---\n${joinLogs(sidecarLogs)}`,
    sidecarKilled,
  };
}
