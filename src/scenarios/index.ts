/** The scenario catalogue: task.toml parsing, spec sets, digests. Other modules import only this. */
export {
  type Catalogue,
  loadCatalogue,
  loadScenario,
  makeCatalogue,
  type ResolvedSpec,
  resolveSpec,
  resolveSpecOrDefault,
  SCENARIO_NAME,
  type Scenario,
  type ScenarioPaths,
  selectScenarios,
} from "./catalogue.js";
export { type DigestEntry, digestOf, scenarioDigest } from "./digest.js";
export {
  parseSpecs,
  SPECS_FILE,
  type SpecSet,
  specNames,
  specNumbers,
  specsOf,
  UnknownSpecError,
} from "./specs.js";
export { formatScenarioTable, type ScenarioRow, scenarioRows } from "./table.js";
export {
  DEFAULT_AGENT_TIMEOUT_SEC,
  DEFAULT_VERIFIER_TIMEOUT_SEC,
  deliverablePathProblem,
  MAX_AGENT_TIMEOUT_SEC,
  MAX_VERIFIER_TIMEOUT_SEC,
  parseTaskToml,
  ScenarioError,
  type TaskSpec,
} from "./task.js";
