/**
 * Fetching a challenger's pack: ≤ 64 KiB, redirects followed, 30 s (trajectoryrl/utils/github.py
 * PackFetcher: httpx follow_redirects, _HTTP_TIMEOUT 30, _MAX_RESPONSE_BYTES 64 KiB). Bytes only:
 * `loadPack(bytes, expectedHash)` (src/pack) verifies. Verified packs are cached by hash under
 * DATA_DIR/packs/ so a restart or a second evaluation never fetches the same pack twice.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, rename, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Agent, type Dispatcher, interceptors } from "undici";
import { InputError, ValidatorError } from "../errors.js";
import { type Logger, safeUrl, silentLogger } from "../log.js";
import { loadPack, MAX_FETCH_BYTES, type PackResult } from "../pack/index.js";
import { BodyTooLargeError, boundedRequest } from "./http.js";

export const PACK_FETCH_TIMEOUT_MS = 30_000;
/** httpx's default cap on redirects, which the Python fetcher inherits. */
export const MAX_PACK_REDIRECTS = 20;

export interface FetchPackOptions {
  timeoutMs?: number;
  maxBytes?: number;
  maxRedirects?: number;
  signal?: AbortSignal;
  /** Base dispatcher (tests); the redirect interceptor is composed on top of it. */
  dispatcher?: Dispatcher;
  log?: Logger;
}

/**
 * GET a pack URL and return its bytes. Errors (all ValidatorError):
 * - InputError pack_url_invalid: not an http(s) URL
 * - InputError pack_too_large: more than maxBytes (declared or streamed; reading stops at the cap)
 * - InputError pack_fetch_too_many_redirects: still a 3xx after maxRedirects hops
 * - InputError pack_fetch_failed: any other non-200 status (retryable when 5xx/429)
 * - InfraError pack_fetch_timeout / pack_fetch_unreachable: our side or the host's network
 * - InfraError aborted: the caller's signal fired
 */
export async function fetchPack(url: string, opts: FetchPackOptions = {}): Promise<Uint8Array> {
  const log = (opts.log ?? silentLogger).child({ component: "pack-fetch" });
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new InputError("pack_url_invalid", "pack URL is not a URL");
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
    throw new InputError("pack_url_invalid", `pack URL scheme ${parsed.protocol} is not http(s)`);
  }
  const maxBytes = opts.maxBytes ?? MAX_FETCH_BYTES;
  const maxRedirects = opts.maxRedirects ?? MAX_PACK_REDIRECTS;
  // One agent per fetch: fetches are rare, and closing it leaves no sockets to a miner's host behind.
  const own = opts.dispatcher ? undefined : new Agent();
  const base = opts.dispatcher ?? own!;
  const dispatcher = base.compose(interceptors.redirect({ maxRedirections: maxRedirects }));
  try {
    const res = await boundedRequest({
      method: "GET",
      url,
      // As upstream's fetcher asks (github.py `_fetch_pack`): a host may answer by content type.
      headers: { accept: "application/json" },
      timeoutMs: opts.timeoutMs ?? PACK_FETCH_TIMEOUT_MS,
      maxBodyBytes: maxBytes,
      signal: opts.signal,
      dispatcher,
      codePrefix: "pack_fetch",
    });
    if (res.status >= 300 && res.status < 400 && res.headers.location !== undefined) {
      throw new InputError(
        "pack_fetch_too_many_redirects",
        `pack URL redirected more than ${maxRedirects} times`,
        {
          detail: { status: res.status },
        },
      );
    }
    if (res.status !== 200) {
      throw new InputError("pack_fetch_failed", `pack URL answered HTTP ${res.status}`, {
        retryable: res.status >= 500 || res.status === 429,
        detail: { status: res.status },
      });
    }
    log.info(
      { url: safeUrl(url), bytes: res.body.byteLength, ms: Math.round(res.elapsedMs) },
      "pack.fetched",
    );
    return new Uint8Array(res.body.buffer, res.body.byteOffset, res.body.byteLength);
  } catch (err) {
    if (err instanceof BodyTooLargeError) {
      throw new InputError("pack_too_large", `pack is larger than the fetch limit of ${maxBytes} bytes`, {
        cause: err,
        detail: err.detail,
      });
    }
    if (err instanceof ValidatorError && err.code !== "aborted") {
      log.warn({ url: safeUrl(url), code: err.code }, "pack.fetch_failed");
    }
    throw err;
  } finally {
    await own?.close();
  }
}

const HASH = /^[0-9a-f]{64}$/;

/** Verified packs on disk, one file per pack hash: `<dir>/<sha256>.json` holding the fetched bytes. */
export class PackCache {
  constructor(readonly dir: string) {}

  static forDataDir(dataDir: string): PackCache {
    return new PackCache(join(dataDir, "packs"));
  }

  pathOf(hash: string): string {
    const h = hash.toLowerCase();
    if (!HASH.test(h)) throw new InputError("invalid_pack_hash", "pack hash must be 64 hex characters");
    return join(this.dir, `${h}.json`);
  }

  /**
   * The cached pack, re-verified against its hash (a file damaged on disk is deleted and reported
   * as a miss, so the caller fetches again).
   */
  async get(
    hash: string,
  ): Promise<{ bytes: Uint8Array; result: Extract<PackResult, { ok: true }> } | undefined> {
    const path = this.pathOf(hash);
    let bytes: Buffer;
    try {
      bytes = await readFile(path);
    } catch {
      return undefined;
    }
    const result = loadPack(bytes, hash);
    if (!result.ok) {
      await unlink(path).catch(() => {});
      return undefined;
    }
    return { bytes: new Uint8Array(bytes), result };
  }

  /** Store bytes that already verified against `hash` (write to a temp name, then rename: never a torn file). */
  async put(hash: string, bytes: Uint8Array): Promise<void> {
    const path = this.pathOf(hash);
    await mkdir(this.dir, { recursive: true });
    const tmp = `${path}.${randomBytes(6).toString("hex")}.tmp`;
    await writeFile(tmp, bytes);
    await rename(tmp, path);
  }
}

export interface ObtainedPack {
  /** loadPack's verdict: a rejection (pack_verify_failed, invalid_pack_structure, …) is a result, not a throw. */
  result: PackResult;
  bytes: Uint8Array;
  fromCache: boolean;
}

/**
 * The pack for `expectedHash`: from the cache when present, else fetched from `url`, verified, and
 * cached only when it verified. Fetch failures throw (see fetchPack); verification failures return.
 */
export async function obtainPack(
  url: string,
  expectedHash: string,
  opts: FetchPackOptions & { cache?: PackCache } = {},
): Promise<ObtainedPack> {
  const hash = expectedHash.toLowerCase();
  const cached = HASH.test(hash) ? await opts.cache?.get(hash) : undefined;
  if (cached) return { result: cached.result, bytes: cached.bytes, fromCache: true };
  const bytes = await fetchPack(url, opts);
  const result = loadPack(bytes, hash);
  if (result.ok && result.pack.skippedFiles.length > 0)
    // Upstream skips a non-text entry of `files` without a word; say which ones the miner lost.
    (opts.log ?? silentLogger).info(
      { pack: hash.slice(0, 12), skipped: result.pack.skippedFiles.slice(0, 20) },
      "pack.files_skipped",
    );
  if (result.ok && opts.cache && HASH.test(hash)) {
    await opts.cache.put(hash, bytes).catch((err: unknown) => {
      // A full disk must not fail the evaluation: the pack is in memory and verified.
      (opts.log ?? silentLogger).warn(
        { err: (err as Error).message, pack: hash.slice(0, 12) },
        "pack.cache_write_failed",
      );
    });
  }
  return { result, bytes, fromCache: false };
}
