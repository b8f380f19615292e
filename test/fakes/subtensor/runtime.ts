/** The test node's runtime is product code now (src/localnet); tests reuse it. */
export * from "../../../src/localnet/subtensor-runtime.js";
