/** The policy sidecar, TypeScript side: run a miner's policy on the host, read its log, build its image. */
export {
  type PolicyLogEvent,
  type PolicyLogSummary,
  type PolicyTurn,
  parsePolicyLogLine,
  policyLogEventSchema,
  summarisePolicyLog,
} from "./log.js";
export {
  LAUNCHER,
  SIDECAR_DIR,
  SIDECAR_DOCKERFILE,
  type SidecarBuildContext,
  sidecarBuildContext,
} from "./paths.js";
export { findPython, type PythonInfo } from "./python.js";
export {
  freePort,
  type PolicyExit,
  type PolicyServer,
  type PolicyServerOptions,
  startPolicyServer,
} from "./server.js";
