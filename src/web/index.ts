/** The status web server's public face: the daemon calls startStatusServer; `status` reuses the renderers. */
export {
  CachedProbe,
  databaseProbe,
  decideHealth,
  dockerProbe,
  type HealthReason,
  type HealthReport,
  type ProbeResult,
} from "./health.js";
export { SETUP_ERROR_FILE, setupError } from "./healthcheck.js";
export { renderMain, renderPage } from "./html.js";
export { METRICS_CONTENT_TYPE, ValidatorMetrics } from "./metrics.js";
export { type StatusServer, type StatusServerOptions, startStatusServer } from "./server.js";
export {
  type AlarmView,
  deriveAlarms,
  type LoopView,
  type RunningEvaluation,
  runningEvaluation,
  type ScenarioProgress,
  StatusReader,
  type StatusSnapshot,
  summarizeEvaluation,
  type VerdictSummary,
  type WinnerView,
} from "./snapshot.js";
export { Tally, type TallySnapshot } from "./tally.js";
export { engineTable, renderText } from "./text.js";
