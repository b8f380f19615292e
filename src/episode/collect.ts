/**
 * After the agent: the meter token closed (nothing may be billed afterwards) and the sidecar
 * stopped, then the agent's container stopped, and only then everything it left (session files,
 * logs, the one deliverable) copied out of it — each path decided by its stat before a byte is
 * read (a directory, a symlink, a special file or a file over its cap is never streamed), each
 * copy under a deadline — and how the agent ended attributed to policy, upstream or infra.
 */
import { classifyStat, type EpisodeContainer, type FetchedPath } from "../sandbox/index.js";
import { type AgentProcess, type AgentRun, TRANSCRIPT_PATH, TURNS_PATH } from "./agent.js";
import { ARTIFACT_FILES } from "./artifacts.js";
import { type AgentEndFacts, attributeAgentEnd, upstreamFailing } from "./attribution.js";
import { type HermesAgent, postMortemExport } from "./hermes-agent.js";
import { type HermesAnswer, incompleteNoProgress, parseHermesSession } from "./hermes-session.js";
import type { ProvenanceTurn } from "./provenance.js";
import type { EpisodeRun } from "./run-context.js";
import { outsideKill, type Sidecar } from "./sidecar.js";
import { parseTurnRecords } from "./turn-records.js";

const MiB = 1024 * 1024;
export const DELIVERABLE_CAP = 64 * MiB;
/** What is copied of each file the agent leaves, at most (a larger one is refused unread). */
export const COLLECT_CAPS = {
  turns: 32 * MiB,
  transcript: 8 * MiB,
  exportErr: 1 * MiB,
  deliverable: DELIVERABLE_CAP,
} as const;

function text(p: FetchedPath): string | undefined {
  return p.kind === "file" ? p.data.toString("utf8") : undefined;
}

const noLogs = { stdout: "", stderr: "", truncated: false };

function joinLogs(l: { stdout: string; stderr: string }): string {
  return `${l.stdout}${l.stderr ? `\n--- stderr ---\n${l.stderr}` : ""}`;
}

export interface Collected {
  deliverable: FetchedPath;
  /** The built-in agent's valid turn records (our format), for the strict provenance check. */
  turns: ProvenanceTurn[] | undefined;
  /** Records that claimed to be a turn and were not valid: answers no one can check. */
  invalidTurns: number;
  /** Every answer the agent recorded, as upstream's provenance reads them. */
  answers: HermesAnswer[];
  policyLog: string;
  /** The sidecar was killed from outside while the agent ran (infra). */
  sidecarKilled: boolean;
}

/**
 * The policy's part ends here: the token is closed, the policy's own log read while it still runs
 * (bounded: the tail, under a deadline), and the sidecar stopped, so nothing the policy does can
 * bill, steer or outlast what follows. A kill of the sidecar we did not send is read before ours.
 */
async function endPolicy(run: EpisodeRun, sidecar: Sidecar): Promise<{ killed: boolean; logTail: string }> {
  await run.closeToken();
  const killed = run.sandbox.engineWatch.killsOf(sidecar.name) > 0;
  if (killed)
    run.fail(outsideKill(sidecar, "the policy sidecar was killed from outside while the agent ran"));
  const logTail = await sidecar.policyLogTail();
  await sidecar.container
    .stop(1_000)
    .catch((err) => run.log.warn({ err: (err as Error).message }, "episode.sidecar.stop_failed"));
  return { killed, logTail };
}

/** What was copied and what was refused unread, in the result; anything refused is noted. */
function account(run: EpisodeRun, label: string, path: string, f: FetchedPath): void {
  const bytes = f.kind === "file" ? f.data.length : f.kind === "too_large" ? f.size : null;
  run.result.agent.files[path] = { kind: f.kind, bytes };
  if (f.kind === "file" || f.kind === "missing") return;
  run.result.notes.push(`${label}_${f.kind}`);
  run.log.warn({ path, kind: f.kind, bytes }, "episode.collect.refused");
}

async function copyOut(run: EpisodeRun, c: EpisodeContainer, label: string, path: string, cap: number) {
  const f = await c.read(path, cap);
  account(run, label, path, f);
  return f;
}

export async function collectAgent(
  run: EpisodeRun,
  agent: AgentProcess,
  sidecar: Sidecar,
  ended: AgentRun,
): Promise<Collected> {
  const t0 = performance.now();
  const policy = await endPolicy(run, sidecar);
  // The agent's container ends with the agent; a kill left it stopped. Make sure: nothing may
  // change a file between its stat and its copy.
  await agent.container.stop(0).catch(() => undefined);
  const c = agent.container;
  const [info, turns, transcript, agentLogs, deliverable, sidecarLogs] = await Promise.all([
    c.state(),
    copyOut(run, c, "turns", TURNS_PATH, COLLECT_CAPS.turns),
    copyOut(run, c, "transcript", TRANSCRIPT_PATH, COLLECT_CAPS.transcript),
    c.logs(1024 * 1024).catch(() => noLogs),
    copyOut(run, c, "deliverable", run.scenario.task.verifier.agent_output_path, COLLECT_CAPS.deliverable),
    sidecar.container.logs(4 * 1024 * 1024).catch(() => noLogs),
  ]);
  run.result.timings.collect_ms = performance.now() - t0;

  const turnsText = text(turns);
  const records = turnsText !== undefined ? parseTurnRecords(turnsText) : undefined;
  if (records && records.invalid > 0) {
    run.result.notes.push("turn_records_invalid");
    run.log.warn({ invalid: records.invalid, first: records.firstInvalid }, "episode.turns.invalid");
  }
  const result = run.result;
  result.agent = {
    ...result.agent,
    exit_code: ended.killedBy ? null : (ended.exitCode ?? info.exitCode),
    end_reason: records?.summary?.reason ?? null,
    end_code: records?.summary?.code ?? null,
    turns: records?.summary?.turns ?? records?.turns.length ?? 0,
    tool_calls:
      records?.summary?.tool_call_count ?? records?.turns.reduce((n, t) => n + t.tool_call_count, 0) ?? 0,
    killed_by: ended.killedBy ?? null,
    invalid_records: records?.invalid ?? 0,
    disk_bytes: ended.diskBytes ?? null,
    disk_inodes: ended.diskInodes ?? null,
  };
  await Promise.all([
    run.artifacts.write(ARTIFACT_FILES.turns, turnsText),
    run.artifacts.write(ARTIFACT_FILES.transcript, text(transcript) || agentLogs.stdout),
    run.artifacts.write(ARTIFACT_FILES.agentLog, joinLogs(agentLogs)),
  ]);
  const facts: AgentEndFacts = {
    exitCode: result.agent.exit_code ?? undefined,
    oomKilled: info.oomKilled,
    upstreamFailing: upstreamFailing(run.receipts()),
    inflightAtKill: ended.inflightAtKill,
  };
  if (ended.killedBy) facts.killedBy = ended.killedBy;
  if (ended.policyExit) facts.policyExit = ended.policyExit;
  if (ended.disk) facts.disk = ended.disk;
  if (records?.summary?.reason) facts.summaryReason = records.summary.reason;
  if (records?.summary?.code) facts.summaryCode = records.summary.code;
  // (A sidecar killed from outside ended the agent: that is the whole story, not a policy crash.)
  const agentFailure =
    ended.killedBy === "policy_exited" && policy.killed ? undefined : attributeAgentEnd(facts);
  if (agentFailure) run.fail(agentFailure);
  if (records?.summary?.reason === "budget_exhausted") result.notes.push("budget_exhausted");
  return {
    deliverable,
    turns: records?.turns,
    invalidTurns: records?.invalidTurns ?? 0,
    answers: (records?.turns ?? []).flatMap((t): HermesAnswer[] => {
      const m = t.messages[0];
      if (m?.role !== "assistant") return [];
      return [
        {
          index: t.turn,
          content: m.content ?? "",
          toolCalls: t.tool_calls.map((call) => ({ name: call.name, arguments: call.arguments_raw })),
          finishReason: t.finish_reason,
        },
      ];
    }),
    policyLog: joinLogs(sidecarLogs),
    sidecarKilled: policy.killed,
  };
}

/**
 * After Hermes (trajrl-bench): the token closed and the sidecar stopped (its log tail read first,
 * as upstream reads it), a post-mortem export when a kill left no session, then the container
 * stopped — nothing the agent left running can change a file after its stat — and the export, the
 * export's error file and the deliverable copied out. Upstream attributes nothing to Hermes' own
 * exit status (a provider failing every call is judged over the whole session); kills by
 * deadline, watchdog, disk or a dead policy are the policy's.
 */
export async function collectHermes(
  run: EpisodeRun,
  agent: HermesAgent,
  sidecar: Sidecar,
  ended: AgentRun,
): Promise<Collected> {
  const t0 = performance.now();
  const c = agent.container;
  const policy = await endPolicy(run, sidecar);
  if (ended.killedBy) {
    const stat = await c.stat(TURNS_PATH);
    // Upstream's rule: a read that comes back empty (missing, not a file, 0 bytes) → export again.
    if (stat === undefined || stat.size === 0 || classifyStat(stat, Number.POSITIVE_INFINITY))
      await postMortemExport(c);
  }
  await c.stop(0).catch(() => undefined);
  const [turns, exportErr, agentLogs, deliverable, sidecarLogs] = await Promise.all([
    copyOut(run, c, "turns", TURNS_PATH, COLLECT_CAPS.turns),
    copyOut(run, c, "turns_export_err", "/workspace/turns_export.err", COLLECT_CAPS.exportErr),
    c.logs(1024 * 1024).catch(() => noLogs),
    copyOut(run, c, "deliverable", run.scenario.task.verifier.agent_output_path, COLLECT_CAPS.deliverable),
    sidecar.container.logs(4 * 1024 * 1024).catch(() => noLogs),
  ]);
  run.result.timings.collect_ms = performance.now() - t0;
  const turnsText = text(turns);
  const session = parseHermesSession(turnsText ?? "");
  const chatExit = ended.killedBy ? null : agent.chatExit();
  run.result.agent = {
    ...run.result.agent,
    exit_code: chatExit,
    end_reason: ended.killedBy ? "killed" : chatExit === 0 ? "completed" : chatExit === null ? null : "error",
    end_code: chatExit !== null && chatExit !== 0 ? `hermes_exit_${chatExit}` : null,
    turns: session.answers.length,
    tool_calls: session.toolCallCount,
    killed_by: ended.killedBy ?? null,
    invalid_records: session.unreadableLines,
    disk_bytes: ended.diskBytes ?? null,
    disk_inodes: ended.diskInodes ?? null,
  };
  await Promise.all([
    run.artifacts.write(ARTIFACT_FILES.turns, turnsText),
    run.artifacts.write(ARTIFACT_FILES.transcript, agent.transcript()),
    run.artifacts.write(
      ARTIFACT_FILES.agentLog,
      `${joinLogs(agentLogs)}${exportErr.kind === "file" ? `\n--- turns_export.err ---\n${exportErr.data.toString("utf8")}` : ""}`,
    ),
  ]);
  if (ended.killedBy && !(ended.killedBy === "policy_exited" && policy.killed)) {
    const f = attributeAgentEnd({
      killedBy: ended.killedBy,
      ...(ended.policyExit ? { policyExit: ended.policyExit } : {}),
      ...(ended.disk ? { disk: ended.disk } : {}),
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
    invalidTurns: 0,
    answers: session.answers,
    policyLog: `${policy.logTail}${policy.logTail ? "\n" : ""}--- stdout/stderr ---\n${joinLogs(sidecarLogs)}`,
    sidecarKilled: policy.killed,
  };
}
