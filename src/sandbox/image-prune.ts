/**
 * Removing the project's images that no longer match the sources. Images are tagged by content
 * hash, so every change of a Dockerfile, the agent, the sidecar runtime or a scenario leaves the
 * previous image behind (a scenario image is ~100 MB). `prune` removes every image labelled as a
 * project image (`trajrl.image`) under the project's repositories whose tags are all stale;
 * the engine itself refuses an image a container still uses, which is reported, never forced.
 */
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import { type Docker, dockerMessage, engine, isNotFound } from "./docker.js";
import { IMAGE_KIND_LABEL } from "./images.js";

export interface PruneOptions {
  /** References to keep (ProjectImages.currentRefs). */
  keep: ReadonlySet<string>;
  /** Only tags under this repository prefix are considered (default "trajrl/"). */
  repoPrefix?: string;
  /** List what would be removed, remove nothing. */
  dryRun?: boolean;
  log?: Logger;
}

export interface PrunedImage {
  ref: string;
  kind: string;
  sizeBytes: number;
}

export interface PruneReport {
  removed: PrunedImage[];
  /** Stale, but the engine refused (a container uses it, or a child image is kept). */
  refused: Array<PrunedImage & { reason: string }>;
  /** Current images left in place. */
  kept: number;
}

/** Children before parents: scenario images are built FROM the agent base. */
const ORDER: Record<string, number> = { scenario: 0, sidecar: 1, "agent-base": 2 };

export async function pruneImages(docker: Docker, opts: PruneOptions): Promise<PruneReport> {
  const prefix = opts.repoPrefix ?? "trajrl/";
  const log = opts.log ?? silentLogger;
  const images = await engine("image_list_failed", "listing images", () =>
    docker.listImages({ filters: { label: [IMAGE_KIND_LABEL] } }),
  );
  const report: PruneReport = { removed: [], refused: [], kept: 0 };
  const stale: PrunedImage[] = [];
  for (const img of images) {
    const tags = (img.RepoTags ?? []).filter((t) => t.startsWith(prefix));
    if (tags.length === 0) continue; // not ours (an operator's image that carries the label)
    if (tags.some((t) => opts.keep.has(t))) {
      report.kept++;
      continue;
    }
    const kind = img.Labels?.[IMAGE_KIND_LABEL] ?? "?";
    for (const ref of tags) stale.push({ ref, kind, sizeBytes: img.Size });
  }
  stale.sort((a, b) => (ORDER[a.kind] ?? 0) - (ORDER[b.kind] ?? 0) || a.ref.localeCompare(b.ref));
  if (opts.dryRun) return { ...report, removed: stale };
  for (const img of stale) {
    try {
      // By reference: removes this tag, and the image with its last tag.
      await docker.getImage(img.ref).remove();
      report.removed.push(img);
      log.info({ image: img.ref, kind: img.kind, bytes: img.sizeBytes }, "image.pruned");
    } catch (err) {
      if (isNotFound(err)) continue; // gone meanwhile (another prune, a parent removed)
      const reason = dockerMessage(err);
      report.refused.push({ ...img, reason });
      log.warn({ image: img.ref, reason }, "image.prune_refused");
    }
  }
  return report;
}
