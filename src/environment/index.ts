/** The composition root's public face: one place that builds an evaluating process's parts. */
export {
  type Environment,
  type OpenEnvironmentOptions,
  openEnvironment,
} from "./environment.js";
export {
  loadMeterTables,
  type MeterOptions,
  type MeterTables,
  meterOf,
  projectImagesOf,
  sandboxSettingsOf,
  startUpstream,
  type Upstream,
} from "./parts.js";
