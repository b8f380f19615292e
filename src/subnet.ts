/**
 * What Season 2 of subnet 11 locks in code (upstream PR #315): the testee default behind the
 * policy, the provider's endpoint and the judge model. Every validator uses these; the settings
 * that once chose them are ignored on the subnet.
 */
export const LOCKED_TESTEE_MODEL = "qwen3.8-27b";
export const LOCKED_JUDGE_MODEL = "glm-5.2";
export const LOCKED_LLM_BASE_URL = "https://api.engy.ai/v1";
/** What every score, heartbeat and progress report names as the agent's model (upstream's f-string). */
export const llmModelLabel = (testee: string): string => `policy:auto (default ${testee})`;
export const LOCKED_LLM_MODEL_LABEL = llmModelLabel(LOCKED_TESTEE_MODEL);

/**
 * The upstream release whose rules this build implements: what every score, progress report and
 * heartbeat sends as `version`. The platform's submission filter drops a vote whose validator version
 * is below its `min_supported` and counts it toward inactivity (trajectoryRL INCENTIVE_MECHANISM.md
 * v6.2/v6.3, "Submission Filter Pipeline", step [6]), so this is the number the platform gates on;
 * this build's own version (package.json) goes in the `User-Agent` and on the status page instead.
 *
 * Season 2 is upstream's v0.7 line. v0.7.0 opened it (trajectoryRL PR #323, merged 2026-09-18:
 * policy sidecar and meter, the 8-model allowlist and frozen price table, a $1.00 safety cap per
 * episode, SPEC 25 = SPEC 24's scenarios) — the rules `UPSTREAM_RELEASE_RULES` names, tied to this
 * build by test/unit/subnet-release.test.ts. Specs 26 (PR #332) and 27 (the $0.30 cap), which this
 * build runs too, shipped in later v0.7 releases whose numbers no stored upstream record names: 0.7.0
 * is the newest release number the research stands on. Raise it with the release a build matches.
 */
export const UPSTREAM_RELEASE = "0.7.0";

/** What upstream's release `UPSTREAM_RELEASE` introduced (PR #323), which this build must hold. */
export const UPSTREAM_RELEASE_RULES = {
  /** The spec the release evaluates, and the spec its allowlist and price table were frozen for. */
  spec: 25,
  /** SPEC 25 runs SPEC 24's scenario set. */
  scenariosOfSpec: 24,
  /** The per-episode safety cap of that spec, USD. */
  episodeCapUsd: 1.0,
  /** Models on the allowlist ("8 prod models"). */
  models: 8,
} as const;
