/**
 * What a daemon refuses at start on a real network: the built-in bench (it never votes on the
 * subnet), the offline model overrides and strict provenance (both for local rehearsals only).
 */
import type { Config } from "../config.js";
import { InputError } from "../errors.js";

/**
 * Which bench the daemon evaluates on: BENCH_SOURCE, else the subnet's benchmark on a real network
 * and the built-in suite on a local chain. The built-in suite never produces a vote on the subnet:
 * asking for it there is refused at start.
 */
export function benchFor(c: Config): "builtin" | "registry" {
  const bench = c.evaluation.benchSource ?? (c.chain.network === "local" ? "builtin" : "registry");
  if (bench === "builtin" && c.chain.network !== "local")
    throw new InputError(
      "builtin_bench_on_subnet",
      `BENCH_SOURCE=builtin cannot vote on ${c.chain.network}: the subnet scores packs on trajrl-bench (unset BENCH_SOURCE, or set NETWORK=local to rehearse on the built-in suite)`,
    );
  return bench;
}

/** Scoring on a real network without the provider key: the Engy simulator would answer every call. */
export function evaluatesOnSimulator(c: Config): boolean {
  return c.chain.network !== "local" && c.evaluation.enabled && c.llm.simulated;
}

/**
 * A vote is made under upstream's rules: on the real models (a daemon that evaluates on a real
 * network needs the provider key: without it the Engy simulator would answer, and its scores could
 * agree with no other validator's), the models locked in code (the offline overrides for tests and
 * local rehearsals never reach a daemon on a real network, with or without a provider key) and
 * provenance reported, not scored (the strict rule is for local evaluation).
 */
export function assertSubnetRules(c: Config): void {
  if (c.chain.network === "local") return;
  if (c.llm.unlocked)
    throw new InputError(
      "offline_override_on_subnet",
      `OFFLINE_LLM_BASE_URL / OFFLINE_DEFAULT_MODEL cannot be used on ${c.chain.network}: every validator runs the locked models and endpoint (unset them, or set NETWORK=local to rehearse)`,
    );
  if (c.evaluation.strictProvenance)
    throw new InputError(
      "strict_provenance_on_subnet",
      `STRICT_PROVENANCE cannot be used on ${c.chain.network}: the subnet reports provenance and never scores it (unset it, or set NETWORK=local to rehearse)`,
    );
  if (evaluatesOnSimulator(c))
    throw new InputError(
      "llm_key_missing_on_subnet",
      `EVAL_ENABLED is on for ${c.chain.network} but LLM_API_KEY is not set: the daemon would score packs on the built-in Engy simulator, and no other validator's vote could agree (set LLM_API_KEY; or EVAL_ENABLED=0 to set weights only; or NETWORK=local to rehearse on the simulator)`,
    );
}
