/**
 * Images built through the engine's build API from the repository's Dockerfiles, tagged by the
 * content hash of their context. An image whose hash is already present is reused; a build is
 * shared by every concurrent caller that needs it (one in-process lock per hash).
 */
import { InfraError, isAbortError } from "../errors.js";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import {
  assembleContext,
  type BuildContext,
  type ContextSource,
  contextTarEntries,
  imageHash,
} from "./context.js";
import { type Docker, dockerMessage, engine, isNotFound } from "./docker.js";
import { bufferStream, packTar } from "./tar.js";

export const IMAGE_HASH_LABEL = "trajrl.image-hash";
/** What a project image is: agent-base | sidecar | scenario (what `images prune` looks at). */
export const IMAGE_KIND_LABEL = "trajrl.image";
/**
 * The checkout whose sources built a project image (its repository root): `images prune` removes
 * only its own checkout's stale images, never those another checkout on the same engine still uses.
 */
export const IMAGE_CHECKOUT_LABEL = "trajrl.checkout";
/** Tags carry this many hex digits of the hash (80 bits: collisions are not a concern). */
const TAG_HEX = 20;

export interface ImageSpec {
  /** Repository part of the reference, e.g. "trajrl/agent-base". */
  repo: string;
  sources: readonly ContextSource[];
  /** Dockerfile path inside the context. */
  dockerfile: string;
  buildArgs?: Readonly<Record<string, string>>;
  /** Ids of images passed in as build args (FROM ${AGENT_BASE}): a rebuilt base changes the hash. */
  baseImageIds?: readonly string[];
  exclude?: readonly string[];
  labels?: Readonly<Record<string, string>>;
}

export interface BuiltImage {
  /** repo:tag, the tag being the content hash prefix. */
  ref: string;
  /** The engine's image id (sha256:…), recorded as the digest for provenance. */
  id: string;
  /** Full content hash (sha256 hex). */
  hash: string;
  /** false when an existing image with the same hash was reused. */
  built: boolean;
  buildMs: number;
  /** `repo@sha256:…` when the image came from a registry (other engines of the pool pull exactly that). */
  repoDigest?: string;
}

interface BuildEvent {
  stream?: string;
  error?: string;
  errorDetail?: { message?: string };
  aux?: { ID?: string };
}

/** Keeps the last lines of a build's output and the step being run, for error reports. */
export class BuildLog {
  private readonly lines: string[] = [];
  step = "";
  constructor(private readonly keep = 40) {}
  push(text: string): void {
    for (const line of text.split("\n")) {
      const l = line.trimEnd();
      if (!l) continue;
      if (/^Step \d+\/\d+ :/.test(l)) this.step = l;
      this.lines.push(l);
      if (this.lines.length > this.keep) this.lines.shift();
    }
  }
  tail(): string {
    return this.lines.join("\n");
  }
}

/** Parse the engine's JSON-lines build stream; resolves with the image id or rejects with the failing step. */
export function followBuild(
  stream: NodeJS.ReadableStream,
  log: BuildLog,
  onLine?: (line: string) => void,
): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    let buf = "";
    let id: string | undefined;
    let failure: string | undefined;
    const handle = (raw: string) => {
      const s = raw.trim();
      if (!s) return;
      let ev: BuildEvent;
      try {
        ev = JSON.parse(s) as BuildEvent;
      } catch {
        log.push(s);
        return;
      }
      if (typeof ev.stream === "string") {
        log.push(ev.stream);
        onLine?.(ev.stream);
        const m = /Successfully built ([0-9a-f]{12,64})/.exec(ev.stream);
        if (m && !id) id = m[1];
      }
      if (ev.aux?.ID) id = ev.aux.ID;
      if (ev.error || ev.errorDetail?.message) {
        failure = ev.errorDetail?.message ?? ev.error;
        log.push(`ERROR: ${failure}`);
      }
    };
    stream.on("data", (chunk: Buffer | string) => {
      buf += chunk.toString();
      let nl = buf.indexOf("\n");
      while (nl >= 0) {
        handle(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        nl = buf.indexOf("\n");
      }
    });
    stream.on("end", () => {
      handle(buf);
      if (failure !== undefined) reject(new Error(failure));
      else resolve(id);
    });
    stream.on("error", reject);
  });
}

export class ImageBuilder {
  private readonly inflight = new Map<string, Promise<BuiltImage>>();

  constructor(
    private readonly docker: Docker,
    private readonly log: Logger = silentLogger,
  ) {}

  /** The reference and content hash `spec` builds to, from its sources as they are now. */
  async resolve(spec: ImageSpec): Promise<{ ref: string; hash: string; ctx: BuildContext }> {
    const ctx = await assembleContext(spec.sources, spec.exclude);
    const hash = imageHash(ctx.filesHash, spec.dockerfile, spec.buildArgs ?? {}, spec.baseImageIds ?? []);
    return { ref: `${spec.repo}:${hash.slice(0, TAG_HEX)}`, hash, ctx };
  }

  /** The image for `spec`: reused when its hash exists, else built once however many callers ask. */
  async ensure(spec: ImageSpec, signal?: AbortSignal): Promise<BuiltImage> {
    const { ref, hash, ctx } = await this.resolve(spec);
    const key = ref;
    const running = this.inflight.get(key);
    if (running) return running;
    const p = (async () => {
      const existing = await this.lookup(ref, hash);
      if (existing) return { ref, id: existing, hash, built: false, buildMs: 0 };
      const t0 = performance.now();
      const tar = await packTar(contextTarEntries(ctx));
      const blog = new BuildLog();
      const log = this.log.child({ image: ref });
      log.info({ files: ctx.files.length, bytes: tar.length }, "image.build.start");
      let streamedId: string | undefined;
      try {
        const stream = await this.docker.buildImage(bufferStream(tar), {
          t: ref,
          dockerfile: spec.dockerfile,
          buildargs: { ...(spec.buildArgs ?? {}) },
          labels: { ...(spec.labels ?? {}), [IMAGE_HASH_LABEL]: hash },
          rm: true,
          forcerm: true,
          // Never reach for a registry: bases are local (offline build of debian:bookworm-slim).
          pull: false,
          ...(signal ? { abortSignal: signal } : {}),
        });
        streamedId = await followBuild(stream, blog, (l) =>
          log.trace({ line: l.trimEnd() }, "image.build.line"),
        );
      } catch (err) {
        if (isAbortError(err) || signal?.aborted) throw err;
        const msg = err instanceof Error && !("statusCode" in err) ? err.message : dockerMessage(err);
        log.error({ step: blog.step, err: msg }, "image.build.failed");
        throw new InfraError(
          "image_build_failed",
          `building ${ref} failed${blog.step ? ` at "${blog.step}"` : ""}: ${msg}\n${blog.tail()}`,
          { cause: err, retryable: false, detail: { ref, step: blog.step, tail: blog.tail() } },
        );
      }
      const id = (await this.lookup(ref, hash)) ?? streamedId;
      if (!id) throw new InfraError("image_build_failed", `building ${ref}: the engine reported no image`);
      const buildMs = performance.now() - t0;
      log.info({ id, ms: Math.round(buildMs) }, "image.build.done");
      return { ref, id, hash, built: true, buildMs };
    })();
    this.inflight.set(key, p);
    try {
      return await p;
    } finally {
      this.inflight.delete(key);
    }
  }

  /** Image id when `ref` exists and carries `hash` (a tag moved by hand does not count). */
  async lookup(ref: string, hash?: string): Promise<string | undefined> {
    try {
      const info = await this.docker.getImage(ref).inspect();
      if (hash !== undefined && info.Config?.Labels?.[IMAGE_HASH_LABEL] !== hash) return undefined;
      return info.Id;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new InfraError("image_inspect_failed", `inspecting ${ref}: ${dockerMessage(err)}`, {
        cause: err,
      });
    }
  }

  /** An image given by reference (operator override): must exist locally; we never pull. */
  async existing(ref: string): Promise<BuiltImage> {
    const id = await engine("image_inspect_failed", `inspecting ${ref}`, async () => {
      try {
        return (await this.docker.getImage(ref).inspect()).Id;
      } catch (err) {
        if (isNotFound(err))
          throw new InfraError("image_missing", `image ${ref} is not present locally (we never pull)`, {
            retryable: false,
          });
        throw err;
      }
    });
    return { ref, id, hash: id.replace(/^sha256:/, ""), built: false, buildMs: 0 };
  }
}
