/**
 * `images prune`: remove the project's images that the current sources no longer build (every
 * change of the agent, the sidecar or a scenario leaves its previous image behind, tagged by its
 * old content hash). Current images, images in use, images another checkout on this engine built
 * and images that are not the project's stay. Sizes are each image's own bytes (shared layers apart).
 */
import type { Command } from "commander";
import { out, warn } from "./io.js";
import { type ScenariosDirFlags, scenariosDirOf } from "./scenarios-flags.js";

interface PruneFlags extends ScenariosDirFlags {
  dryRun?: boolean;
}

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(0)} MB`;

export function registerImages(program: Command): void {
  const images = program.command("images").description("the project's Docker images");
  images
    .command("prune")
    .description("remove the project's images the current sources no longer build (never one in use)")
    .option(
      "--dir <dir>",
      "scenarios directory whose images are current (default SCENARIOS_DIR, ./scenarios)",
    )
    .option("--dry-run", "list what would be removed, remove nothing")
    .action(async (flags: PruneFlags) => {
      const [{ loadConfig }, { loadCatalogue }, sandboxMod, { ProjectImages }, { REPO_ROOT }] =
        await Promise.all([
          import("../config.js"),
          import("../scenarios/index.js"),
          import("../sandbox/index.js"),
          import("../bench/index.js"),
          import("../repo.js"),
        ]);
      const config = loadConfig();
      const catalogue = await loadCatalogue(await scenariosDirOf(flags));
      const docker = sandboxMod.connectDocker(config.evaluation.dockerSocket);
      const { InfraError } = await import("../errors.js");
      await docker.ping().catch((err: Error) => {
        throw new InfraError(
          "docker_unavailable",
          `no Docker engine answers on ${config.evaluation.dockerSocket} (${err.message})`,
          { retryable: false },
        );
      });
      const project = new ProjectImages(docker, {
        repoRoot: REPO_ROOT,
        ...(config.evaluation.agentImage ? { agentImage: config.evaluation.agentImage } : {}),
        ...(config.evaluation.sidecarImage ? { sidecarImage: config.evaluation.sidecarImage } : {}),
      });
      const keep = await project.currentRefs(catalogue);
      const r = await sandboxMod.pruneImages(docker, {
        keep,
        checkout: REPO_ROOT,
        dryRun: flags.dryRun === true,
      });
      printPrune(r, flags.dryRun === true);
    });
}

/** One line per image, then the totals: what goes (its own bytes), what stays and why. */
function printPrune(r: import("../sandbox/index.js").PruneReport, dryRun: boolean): void {
  const verb = dryRun ? "would remove" : "removed";
  for (const img of r.removed) out(`${verb} ${img.ref} (${img.kind}, ${mb(img.sizeBytes)} of its own)`);
  for (const img of r.inUse) out(`kept ${img.ref}: a container uses it`);
  for (const img of r.refused) warn(`kept ${img.ref}: ${img.reason}`);
  const freed = r.removed.reduce((s, i) => s + i.sizeBytes, 0);
  const others = [...new Set(r.otherCheckouts.map((i) => i.checkout))];
  out(
    `${verb} ${r.removed.length} image tag(s), ${dryRun ? "freeing" : "freed"} at least ${mb(freed)}; ${r.kept} current image(s) kept` +
      (r.inUse.length ? `; ${r.inUse.length} in use` : "") +
      (r.refused.length ? `; ${r.refused.length} refused by the engine` : "") +
      (others.length
        ? `; ${r.otherCheckouts.length} of another checkout (${others.join(", ")}) left to its own prune`
        : ""),
  );
}
