/** Where the operator changes things, for the hints `check`, `localnet` and the entrypoint give. */
import type { Config } from "../config.js";

/** Where the operator changes things: the compose deployment (host-side settings) or a plain process. */
export interface Deployment {
  inContainer: boolean;
  /** WALLETS_DIR as compose resolved it on the host (TRAJRL_HOST_WALLETS_DIR), when known. */
  hostWalletsDir: string | undefined;
  /** The compose command the README uses, for hints. */
  compose: string;
}

export const COMPOSE = "docker compose -f docker/docker-compose.validator.yml";

/**
 * Where this process runs, for hints: in the compose deployment (the image sets DAEMON_IN_CONTAINER),
 * with the host's WALLETS_DIR and the compose command the containers were started with (the
 * rehearsal's override names its pair of files in TRAJRL_COMPOSE), or as a plain process.
 */
export async function deploymentOf(config: Config): Promise<Deployment> {
  const { namedEnv } = await import("../config.js");
  return {
    inContainer: config.evaluation.daemonInContainer === true,
    hostWalletsDir: namedEnv("TRAJRL_HOST_WALLETS_DIR"),
    compose: namedEnv("TRAJRL_COMPOSE") ?? COMPOSE,
  };
}
