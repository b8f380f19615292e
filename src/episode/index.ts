/** The episode's public face: one scenario run for one pack, and the scenario self-check. */
export { ARTIFACT_FILES } from "./artifacts.js";
export { attributeAgentEnd, type KillReason, primaryFailure, upstreamFailing } from "./attribution.js";
export {
  type BenchGradeInput,
  ctrfCorrectness,
  type GraderNetworks,
  gradeBenchDeliverable,
  rewardOf,
} from "./bench-verifier.js";
export { type CtrfReport, parseCtrf, parseReward, scoreOf } from "./ctrf.js";
export { type Deadline, deadline } from "./deadline.js";
export { POLICY_PORT, runEpisode } from "./episode.js";
export {
  benchGrader,
  builtinGrader,
  type GradeAsk,
  type Grader,
  type GraderDescription,
  type GraderKind,
  type GradeSite,
} from "./grader.js";
export { type GradingRecord, gradingRecord } from "./grading-record.js";
export {
  type CheckOptions,
  type CheckRow,
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
