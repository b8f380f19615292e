/**
 * Where an evaluation's scenarios and images come from: the built-in suite built from this
 * repository, or the subnet's benchmark (trajrl-bench) pulled from a registry.
 */
export { BuiltinBench } from "./builtin.js";
export {
  type BenchBuildRequest,
  type BenchBuildResult,
  type BenchImage,
  type BenchTarget,
  benchRefs,
  OfflineBench,
  type OfflineBenchOptions,
  type PushAuth,
  parseBenchTag,
  parseBenchTarget,
  parsePushEvents,
  pushAuthFor,
  splitRef,
} from "./offline-bench.js";
export {
  probeScenarioInfo,
  probeScenarios,
  ScenarioInfoProbe,
  ScenariosProbe,
} from "./probes.js";
export { ProjectImages, type ProjectImagesOptions } from "./project-images.js";
export {
  benchImageRef,
  DEFAULT_AGENT_TIMEOUT_SEC,
  DEFAULT_BENCH_REPO,
  harnessImageHashOf,
  RegistryBench,
} from "./registry.js";
export { authFromDockerConfig, registryAuthFor, registryOf } from "./registry-auth.js";
export type {
  BenchKind,
  BenchProgress,
  BenchProvenance,
  BenchResolution,
  BenchSource,
  PreparedBench,
} from "./source.js";
export {
  loadSubnetSpecs,
  mergeSpecFile,
  PUBLISHED_SPECS,
  type ResolvedSubnetSpec,
  resolveSubnetSpec,
  type SubnetSpec,
  type SubnetSpecTable,
} from "./subnet-specs.js";
