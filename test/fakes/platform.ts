/** The fake platform is product code now (src/localnet: `trajrl-validator localnet`); tests reuse it. */
export * from "../../src/localnet/platform.js";
