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
