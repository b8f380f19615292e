/** The composition root's public face: one place that builds an evaluating process's parts. */
export {
  type Environment,
  type OpenEnvironmentOptions,
  openEnvironment,
} from "./environment.js";
