/**
 * The evaluation's images on the engines other than the first: a registry's image is pulled there by
 * digest; anything else is copied through the two engines' APIs, all of an evaluation's images in
 * one copy, one copy at a time per engine. The ids must match. An engine takes the evaluation's
 * episodes once all of its images are there; a failed copy is counted and tried again in 30 s.
 */
import type { BenchProgress } from "../bench/index.js";
import type { EpisodeImages } from "../episode/index.js";
import { InfraError, toValidatorError } from "../errors.js";
import { type BuiltImage, copyImages, type Docker, imageIdOf, pullDigestAs } from "../sandbox/index.js";
import type { PoolEngine } from "./engine.js";

/** What the images need of the pool. */
export interface ImagesHost {
  /** The first engine's Docker: where the images were built and pulled. */
  source(): Docker;
  /** Aborted when the pool closes. */
  signal: AbortSignal;
  closed(): boolean;
  observer?: { benchProgress?(p: BenchProgress): void } | undefined;
  /** An engine's images or counters changed. */
  changed(): void;
  /** An engine has all of the evaluation's images now: it may take episodes. */
  ready(): void;
}

export const imageKey = (i: Pick<BuiltImage, "ref" | "id">) => `${i.ref}@${i.id}`;

export class EngineImages {
  /** The running evaluation's images (prefetch): an engine that needs one gets them all in one copy. */
  private wanted: readonly BuiltImage[] = [];

  constructor(private readonly pool: ImagesHost) {}

  /** The evaluation's images for an episode on `e`: on another engine than the first, placed there first. */
  imagesOn(e: PoolEngine, of: EpisodeImages): EpisodeImages {
    if (e.primary) return of;
    return {
      sidecar: async (signal) => {
        const img = await of.sidecar(signal);
        await this.ensureImagesOn(e, [img, ...this.wanted], signal ? { signal } : {});
        return img;
      },
      scenario: async (s, signal) => {
        const img = await of.scenario(s, signal);
        await this.ensureImagesOn(e, [img, ...this.wanted], signal ? { signal } : {});
        return img;
      },
    };
  }

  /**
   * Place an evaluation's images on every other engine that takes episodes, in the background (one
   * copy per engine for all of them: shared layers travel once); episodes there wait for theirs.
   */
  prefetch(
    engines: readonly PoolEngine[],
    images: readonly BuiltImage[],
    onProgress?: (p: BenchProgress) => void,
  ): void {
    this.wanted = images;
    for (const e of engines) {
      e.images.wanted = images.length;
      if (e.primary) {
        for (const i of images) e.images.present.add(imageKey(i));
        continue;
      }
      if (e.state !== "ready" || e.cfg.slots === 0) continue;
      this.refreshImages(e, onProgress);
    }
    this.pool.changed();
  }

  /**
   * Bring the wanted images to `e`, which takes episodes again once they are all there. A failed
   * copy (a full disk, the engine away) is counted and tried again in 30 s while it is ready.
   */
  refreshImages(e: PoolEngine, onProgress?: (p: BenchProgress) => void): void {
    clearTimeout(e.imagesRetry);
    e.imagesRetry = undefined;
    const wanted = this.wanted;
    if (e.primary || !wanted.length || this.pool.closed()) {
      e.imagesReady = true;
      return;
    }
    e.imagesReady = wanted.every((i) => e.images.present.has(imageKey(i)) && e.imageJobs.has(imageKey(i)));
    this.ensureImagesOn(e, wanted, onProgress ? { onProgress } : {}).then(
      () => {
        if (this.wanted !== wanted) return;
        e.imagesReady = true;
        this.pool.ready();
      },
      (err) => {
        const ve = toValidatorError(err, "image_copy_failed");
        e.failures[ve.code] = (e.failures[ve.code] ?? 0) + 1;
        e.lastError = { code: ve.code, message: ve.message, at: Date.now() };
        e.log.warn({ code: ve.code, err: ve.message }, "engine.images_failed");
        this.pool.changed();
        if (this.pool.closed() || this.wanted !== wanted) return;
        e.imagesRetry = setTimeout(() => {
          if (e.state === "ready") this.refreshImages(e, onProgress);
        }, 30_000);
        e.imagesRetry.unref();
      },
    );
  }

  async ensureImagesOn(
    e: PoolEngine,
    images: readonly BuiltImage[],
    opts: { signal?: AbortSignal; onProgress?: (p: BenchProgress) => void },
  ): Promise<void> {
    const waits: Array<Promise<void>> = [];
    const todo: BuiltImage[] = [];
    for (const img of images) {
      const job = e.imageJobs.get(imageKey(img));
      if (job) waits.push(job);
      else if (!todo.some((t) => imageKey(t) === imageKey(img))) todo.push(img);
    }
    if (todo.length) {
      const job = e.copyChain.then(() => this.placeImages(e, todo, opts.onProgress));
      e.copyChain = job.catch(() => undefined);
      for (const img of todo) e.imageJobs.set(imageKey(img), job);
      job.catch(() => {
        for (const img of todo) if (e.imageJobs.get(imageKey(img)) === job) e.imageJobs.delete(imageKey(img));
      });
      waits.push(job);
    }
    await untilAborted(Promise.all(waits), opts.signal);
  }

  private async placeImages(
    e: PoolEngine,
    images: readonly BuiltImage[],
    onProgress?: (p: BenchProgress) => void,
  ): Promise<void> {
    const docker = e.conn!.docker;
    const source = this.pool.source();
    const progress = (
      img: BuiltImage | string,
      phase: BenchProgress["phase"],
      extra: Partial<BenchProgress> = {},
    ) => {
      const p: BenchProgress = {
        engine: e.cfg.name,
        image: typeof img === "string" ? img : shortImage(img.ref),
        ref: typeof img === "string" ? img : img.ref,
        phase,
        ...extra,
      };
      onProgress?.(p);
      this.pool.observer?.benchProgress?.(p);
    };
    const missing: BuiltImage[] = [];
    for (const img of images) {
      if ((await imageIdOf(docker, img.ref)) === img.id) e.images.present.add(imageKey(img));
      else missing.push(img);
    }
    // A registry's image: the engine pulls exactly that digest itself (no transit through this host).
    const toCopy: BuiltImage[] = [];
    for (const img of missing) {
      if (!img.repoDigest) {
        toCopy.push(img);
        continue;
      }
      try {
        progress(img, "pulling");
        await pullDigestAs(docker, img.repoDigest, img.ref, { signal: this.pool.signal });
        if ((await imageIdOf(docker, img.ref)) === img.id) {
          e.images.pulls++;
          e.images.present.add(imageKey(img));
          progress(img, "ready");
          continue;
        }
      } catch (err) {
        e.log.warn({ image: img.repoDigest, err: (err as Error).message }, "engine.pull_failed_copying");
      }
      toCopy.push(img);
    }
    if (toCopy.length) {
      const t0 = performance.now();
      const what = toCopy.length === 1 ? shortImage(toCopy[0]!.ref) : `${toCopy.length} images`;
      progress(what, "copying", { bytes: 0 });
      e.log.info({ images: toCopy.map((i) => i.ref) }, "engine.images_copying");
      const r = await copyImages(
        source,
        docker,
        toCopy.map((i) => i.ref),
        { signal: this.pool.signal, onProgress: (c) => progress(what, "copying", { bytes: c.bytes }) },
      );
      for (const img of toCopy) {
        const id = await imageIdOf(docker, img.ref);
        if (id !== img.id)
          throw new InfraError(
            "image_copy_failed",
            `engine ${e.cfg.name}: ${img.ref} arrived as ${id ?? "nothing"}, not ${img.id}`,
          );
        e.images.present.add(imageKey(img));
      }
      e.images.copies += toCopy.length;
      e.images.copiedBytes += r.bytes;
      const ms = performance.now() - t0;
      progress(what, "ready", { bytes: r.bytes, ms });
      e.log.info({ images: toCopy.length, bytes: r.bytes, ms: Math.round(ms) }, "engine.images_copied");
    }
    this.pool.changed();
  }
}

function untilAborted<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function shortImage(ref: string): string {
  return ref.replace(/^.*\//, "").replace(/:.*$/, "");
}
