/** The subtensor test node is product code now (src/localnet: `trajrl-validator localnet`); tests reuse it. */
export * from "../../src/localnet/chain-node.js";
