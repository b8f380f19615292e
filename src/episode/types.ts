import type { FailureClass } from "../errors.js";

/**
 * What the episode needs of a scenario (the catalogue's Scenario satisfies it): the folder
 * layout of DESIGN.md "Scenario" and the parsed task.toml.
 */
export interface EpisodeScenario {
  name: string;
  /** scenarios/<name>: environment/, tests/, solution/ live below it. */
  dir: string;
  /** instruction.md's text (becomes /workspace/INSTRUCTION.md). */
  instruction: string;
  task: {
    agent: { timeout_sec: number };
    verifier: { timeout_sec: number; agent_output_path: string };
    metadata?: { null_floor?: number | undefined };
  };
}

export interface EpisodeFailure {
  class: Exclude<FailureClass, "input">;
  code: string;
  message: string;
}
