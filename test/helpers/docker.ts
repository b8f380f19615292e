import Docker from "dockerode";

/**
 * Docker-backed tests never skip: when no engine answers they fail with the command that fixes it.
 */
export async function requireDocker(): Promise<Docker> {
  const docker = new Docker({ socketPath: process.env.DOCKER_SOCKET ?? "/var/run/docker.sock" });
  try {
    await docker.ping();
  } catch (err) {
    throw new Error(
      `no Docker engine answers on the socket (${(err as Error).message}); run: bash scripts/docker-up.sh`,
    );
  }
  return docker;
}
