/**
 * The policy sidecar, TypeScript side: the SDK file every sidecar runs, a miner's policy on the host,
 * its log, its image, and the static scan of its files that upstream reports with every score.
 */
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
  compareCodePoints,
  judgePolicyScan,
  type PolicyScan,
  PolicyScanUnencodable,
  scanPolicyFiles,
} from "./scan.js";
export {
  SDK_FILE,
  SDK_PYTHONPATH,
  SDK_SIDECAR_DIR,
  SDK_SIDECAR_PATH,
  SDK_THIRD_PARTY_IMPORTS,
  sdkSingleFile,
} from "./sdk.js";
export {
  buildSdkSingleFile,
  bundleSdk,
  readSdkSources,
  SDK_SECTIONS,
  SDK_SOURCE_DIR,
  type SdkSource,
} from "./sdk-bundle.js";
export {
  freePort,
  type PolicyExit,
  type PolicyServer,
  type PolicyServerOptions,
  startPolicyServer,
} from "./server.js";
