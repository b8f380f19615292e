/**
 * Removing the project's images that no longer match the sources. Images are tagged by content
 * hash, so every change of a Dockerfile, the agent, the sidecar runtime or a scenario leaves the
 * previous image behind (a scenario image is ~100 MB). `prune` removes every image labelled as a
 * project image (`trajrl.image`) under the project's repositories whose tags are all stale — of
 * this checkout only (`trajrl.checkout`: another checkout on the same engine, the host's beside the
 * validator image's, still runs its own), and never one a container uses (listed as in use, in a
 * dry run too). Sizes are each image's own bytes, without the layers it shares with others.
 */
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import { type Docker, dockerMessage, engine, isNotFound } from "./docker.js";
import { IMAGE_CHECKOUT_LABEL, IMAGE_KIND_LABEL } from "./images.js";

export interface PruneOptions {
  /** References to keep (ProjectImages.currentRefs). */
  keep: ReadonlySet<string>;
  /** Only tags under this repository prefix are considered (default "trajrl/"). */
  repoPrefix?: string;
  /** This checkout (its repository root): images another checkout built are left to it. */
  checkout?: string;
  /** List what would be removed, remove nothing. */
  dryRun?: boolean;
  log?: Logger;
}

export interface PrunedImage {
  ref: string;
  kind: string;
  /** The image's own bytes: what removing it frees unless another stale image shares them. */
  sizeBytes: number;
}

export interface PruneReport {
  removed: PrunedImage[];
  /** Stale, but the engine refused (a child image is kept, a container appeared meanwhile). */
  refused: Array<PrunedImage & { reason: string }>;
  /** Stale, but a container (running or stopped) uses it: kept, never forced. */
  inUse: PrunedImage[];
  /** Current images left in place. */
  kept: number;
  /** Stale for this checkout's sources but built by another checkout: left to that checkout's prune. */
  otherCheckouts: Array<PrunedImage & { checkout: string }>;
}

/** Children before parents: scenario images are built FROM the agent base. */
const ORDER: Record<string, number> = { scenario: 0, sidecar: 1, "agent-base": 2 };

/** Each image's own bytes (its size less what it shares with other images), by id. */
async function ownSizes(docker: Docker): Promise<Map<string, number>> {
  const df = (await docker.df().catch(() => undefined)) as
    | { Images?: Array<{ Id: string; Size: number; SharedSize: number }> }
    | undefined;
  const out = new Map<string, number>();
  for (const i of df?.Images ?? []) out.set(i.Id, i.SharedSize >= 0 ? i.Size - i.SharedSize : i.Size);
  return out;
}

/** Ids of every image a container (in any state) was created from. */
async function imagesInUse(docker: Docker): Promise<Set<string>> {
  const cs = await engine("container_list_failed", "listing containers", () =>
    docker.listContainers({ all: true }),
  );
  return new Set(cs.map((c) => c.ImageID));
}

export async function pruneImages(docker: Docker, opts: PruneOptions): Promise<PruneReport> {
  const prefix = opts.repoPrefix ?? "trajrl/";
  const log = opts.log ?? silentLogger;
  const [images, used, sizes] = await Promise.all([
    engine("image_list_failed", "listing images", () =>
      docker.listImages({ filters: { label: [IMAGE_KIND_LABEL] } }),
    ),
    imagesInUse(docker),
    ownSizes(docker),
  ]);
  const report: PruneReport = { removed: [], refused: [], inUse: [], kept: 0, otherCheckouts: [] };
  const stale: PrunedImage[] = [];
  for (const img of images) {
    const tags = (img.RepoTags ?? []).filter((t) => t.startsWith(prefix));
    if (tags.length === 0) continue; // not ours (an operator's image that carries the label)
    if (tags.some((t) => opts.keep.has(t))) {
      report.kept++;
      continue;
    }
    const kind = img.Labels?.[IMAGE_KIND_LABEL] ?? "?";
    const sizeBytes = sizes.get(img.Id) ?? img.Size;
    const checkout = img.Labels?.[IMAGE_CHECKOUT_LABEL];
    for (const ref of tags) {
      const entry = { ref, kind, sizeBytes };
      if (opts.checkout && checkout && checkout !== opts.checkout)
        report.otherCheckouts.push({ ...entry, checkout });
      else if (used.has(img.Id)) report.inUse.push(entry);
      else stale.push(entry);
    }
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
