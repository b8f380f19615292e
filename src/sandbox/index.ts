/** The sandbox's public face: Docker images, networks, containers, archives, limits and the reaper. */
export { type FetchedPath, getPath, putFiles, statPath } from "./container-files.js";
export {
  CappedText,
  type CapturedLogs,
  type ExecOptions,
  type ExecResult,
  execIn,
  readLogs,
} from "./container-output.js";
export {
  type ContainerSpec,
  EPISODE_DNS_UPSTREAM,
  type Limits,
  type NetworkAttachment,
  SCENARIO_LIMITS,
  SIDECAR_LIMITS,
} from "./container-spec.js";
export {
  attachStdin,
  connectNetwork,
  createContainer,
  inspectContainer,
  removeContainer,
  startContainer,
  stopContainer,
  waitExit,
} from "./containers.js";
export { assembleContext, type BuildContext, type ContextSource, imageHash } from "./context.js";
export { DNS_CVE, type EngineDnsVerdict, engineDnsVerdict } from "./dns.js";
export {
  boundEngineCalls,
  type Container,
  connectDocker,
  DEFAULT_ENGINE_TIMEOUTS,
  type Docker,
  type EngineTimeouts,
  engineTimeouts,
} from "./docker.js";
export {
  apiAtLeast,
  connectEngine,
  type EngineConnection,
  type EngineEndpoint,
  type EngineFacts,
  MIN_API_VERSION,
  parseEngineUrl,
  probeEngine,
} from "./engine.js";
export { installEngineFirewall } from "./engine-firewall.js";
export { EngineWatch } from "./engine-watch.js";
export {
  type ContainerState,
  dockerEpisodeEngine,
  type EpisodeContainer,
  type EpisodeEngine,
} from "./episode-engine.js";
export {
  AGENT_BRIDGE_PREFIX,
  canonicalCidr,
  chainRules,
  engineFirewallScript,
  FIREWALL_CHAIN,
  installFirewall,
  METER_BRIDGE_PREFIX,
  METER_EPISODE_PORT,
  verifyEngineFirewall,
} from "./firewall.js";
export { type CopyProgress, copyImages, imageIdOf, pullDigestAs } from "./image-copy.js";
export { type PruneOptions, type PruneReport, pruneImages } from "./image-prune.js";
export {
  type BuiltImage,
  IMAGE_CHECKOUT_LABEL,
  IMAGE_HASH_LABEL,
  IMAGE_KIND_LABEL,
  ImageBuilder,
  type ImageSpec,
} from "./images.js";
export {
  LABEL,
  labelsFor,
  newSession,
  type Role,
  type SandboxSession,
  safeName,
  uniqueName,
} from "./labels.js";
export {
  type LayerBounds,
  type LayerUse,
  type LayerWatch,
  layerBytes,
  openLayerCounter,
  watchLayer,
} from "./layer-watch.js";
export {
  attachRelay,
  DockerStreamDemux,
  encodeFrame,
  FRAME,
  FRAME_HEADER,
  FrameDecoder,
  type RelayLink,
} from "./meter-link.js";
export { type EpisodeNetwork, NetworkPool } from "./networks.js";
export {
  digestFor,
  type PulledImage,
  type PullProgress,
  pullImage,
  type RegistryAuth,
  repositoryOf,
  tagOf,
} from "./pull.js";
export { EpisodeScope, Reaper, type SweepResult } from "./reaper.js";
export {
  type ContainerRuntime,
  chooseEpisodeRuntime,
  containerRuntime,
  type EpisodeRuntimeSetting,
  engineRuntimes,
  GVISOR_RUNTIME,
  gvisorProcessBounds,
  type ResolvedRuntime,
  RUNC,
  RUNC_RUNTIME,
  RUNS_EPISODE_CODE,
} from "./runtime.js";
export {
  allocateLoopback,
  type EpisodeTopology,
  type MeterLoss,
  RELAY_LIMITS,
  Sandbox,
  type SandboxOptions,
  type ScenarioRuntimeNeeds,
} from "./sandbox.js";
export { hostAddress } from "./subnet.js";
export {
  type ArchivedPath,
  classifyStat,
  type PathStat,
  packTar,
  parsePathStat,
  readFirstEntry,
  type TarEntry,
} from "./tar.js";
