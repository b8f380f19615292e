/** The episode's public face: one scenario run for one pack, and the scenario self-check. */
export { ARTIFACT_FILES } from "./artifacts.js";
export { attributeAgentEnd, type KillReason, primaryFailure, upstreamFailing } from "./attribution.js";
export { type BenchGradeInput, ctrfCorrectness, gradeBenchDeliverable, rewardOf } from "./bench-verifier.js";
export { type CtrfReport, parseCtrf, parseReward, scoreOf } from "./ctrf.js";
export { type Deadline, deadline } from "./deadline.js";
export { POLICY_PORT, runEpisode } from "./episode.js";
export { type GraderKind, type GradingRecord, gradingRecord } from "./grading-record.js";
export {
  type CheckOptions,
  type CheckRow,
  type CheckVerifier,
  checkScenario,
  checkScenarios,
  formatCheckTable,
} from "./scenario-check.js";
export type {
  EpisodeFailure,
  EpisodeImages,
  EpisodeMeter,
  EpisodePhaseUpdate,
  EpisodeResult,
  EpisodeRunPhase,
  EpisodeRuntime,
  EpisodeScenario,
  EpisodeTimeouts,
  RunEpisodeOptions,
  ScenarioImageSource,
  SidecarSdk,
} from "./types.js";
export {
  type GradeInput,
  type GradeResult,
  gradeDeliverable,
  HARNESS_VERIFIER,
  type ReportChannel,
  type ReportContract,
  reportContractOf,
} from "./verifier.js";
