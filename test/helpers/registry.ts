/**
 * The loopback registry of the tests (Debian's docker-registry, scripts/registry-up.sh) and the
 * offline trajrl-bench pushed to it, its local references removed so that what a test runs comes
 * from the registry.
 */
import type Docker from "dockerode";
import { type BenchBuildResult, OfflineBench } from "../../src/bench/index.js";
import { REPO_ROOT } from "./episode.js";

export const REGISTRY = `127.0.0.1:${process.env.TRAJRL_REGISTRY_PORT ?? "5000"}`;

/** Removes a reference; the build cache keeps the image under its content-hash tag. */
export async function untag(docker: Docker, ref: string): Promise<void> {
  await docker
    .getImage(ref)
    .remove({ noprune: true })
    .catch(() => undefined);
}

/** `bench build --push TARGET --tag TAG`, then the pushed references removed locally. */
export async function pushOfflineBench(
  docker: Docker,
  o: { target: string; tag: string; scenarios: readonly string[] },
): Promise<BenchBuildResult> {
  const answer = await fetch(`http://${REGISTRY}/v2/`).catch((err: Error) => err);
  if (answer instanceof Error || answer.status !== 200)
    throw new Error(`no registry answers on ${REGISTRY}; run: bash scripts/registry-up.sh`);
  const built = await new OfflineBench(docker, { repoRoot: REPO_ROOT }).build({
    target: o.target,
    tag: o.tag,
    scenarios: o.scenarios,
    push: true,
  });
  for (const ref of [built.base.ref, ...built.scenarios.map((s) => s.ref)]) await untag(docker, ref);
  return built;
}
