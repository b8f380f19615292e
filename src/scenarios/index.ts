/** The scenario catalogue: task.toml parsing, the suite's named sets, digests. Other modules import only this. */
export {
  type Catalogue,
  loadCatalogue,
  loadScenario,
  makeCatalogue,
  type ResolvedSuite,
  resolveSuite,
  SCENARIO_NAME,
  type Scenario,
  type ScenarioPaths,
  selectScenarios,
} from "./catalogue.js";
export { type DigestEntry, digestOf, scenarioDigest, testFilesDigest } from "./digest.js";
export {
  BUILTIN_SPEC,
  CUSTOM_SUITE,
  parseSuites,
  SUITE_NAME,
  SUITES_FILE,
  type SuiteSet,
  specLabel,
  suiteNames,
  suiteScenarioNames,
  suitesOf,
  UnknownSuiteError,
} from "./suites.js";
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
