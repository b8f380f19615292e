/**
 * Fetching a challenger's pack: ≤ 64 KiB, redirects followed, 30 s (trajectoryrl/utils/github.py
 * PackFetcher: httpx follow_redirects, _HTTP_TIMEOUT 30, _MAX_RESPONSE_BYTES 64 KiB), but never
 * into a non-public address (address.ts). Bytes only:
 * `loadPack(bytes, expectedHash)` (src/pack) verifies. Verified packs are cached by hash under
 * DATA_DIR/packs/ so a restart or a second evaluation never fetches the same pack twice.
 */
import { randomBytes } from "node:crypto";
import { lookup } from "node:dns/promises";
import { mkdir, readFile, rename, unlink, writeFile } from "node:fs/promises";
import { isIP } from "node:net";
import { join } from "node:path";
import { Agent, type Dispatcher } from "undici";
import { type ErrorCode, InputError, ValidatorError } from "../errors.js";
import { type Logger, silentLogger } from "../log.js";
import { loadPack, MAX_FETCH_BYTES, type PackResult } from "../pack/index.js";
import { isPublicAddress, NonPublicAddressError, publicOnlyLookup } from "./address.js";
import { BodyTooLargeError, boundedRequest } from "./http.js";

export const PACK_FETCH_TIMEOUT_MS = 30_000;
/** httpx's default cap on redirects, which the Python fetcher inherits. */
export const MAX_PACK_REDIRECTS = 20;

export interface FetchPackOptions {
  timeoutMs?: number;
  maxBytes?: number;
  maxRedirects?: number;
  signal?: AbortSignal;
  /** Base dispatcher (tests); redirect hops get their own, public-only, unless allowed below. */
  dispatcher?: Dispatcher;
  /** Follow redirects into loopback and private networks too. Tests only (their hosts are on loopback). */
  allowPrivateRedirects?: boolean;
  log?: Logger;
}

/** The statuses httpx follows (`Response.is_redirect`): 301, 302, 303, 307, 308 with a Location. */
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/**
 * GET a pack URL and return its bytes. Redirects are followed as httpx follows them, but never
 * into a loopback, private or link-local address (checked on the name and again when the socket
 * connects). Errors (all ValidatorError):
 * - InputError pack_url_invalid: not an http(s) URL
 * - InputError pack_too_large: more than maxBytes (declared or streamed; reading stops at the cap)
 * - InputError pack_fetch_too_many_redirects: still a redirect after maxRedirects hops
 * - InputError pack_fetch_forbidden_redirect: a redirect to a non-public address
 * - InputError pack_fetch_failed: any other non-200 status (retryable when 5xx/429), a bad Location
 * - InfraError pack_fetch_timeout / pack_fetch_unreachable: our side or the host's network
 * - InfraError aborted: the caller's signal fired
 */
export async function fetchPack(url: string, opts: FetchPackOptions = {}): Promise<Uint8Array> {
  const log = (opts.log ?? silentLogger).child({ component: "pack-fetch" });
  const first = httpUrl(url, "pack_url_invalid", "pack URL");
  const maxBytes = opts.maxBytes ?? MAX_FETCH_BYTES;
  const maxRedirects = opts.maxRedirects ?? MAX_PACK_REDIRECTS;
  const timeoutMs = opts.timeoutMs ?? PACK_FETCH_TIMEOUT_MS;
  const started = performance.now();
  // Own agents per fetch: fetches are rare, and closing them leaves no sockets to a miner's host behind.
  const own = opts.dispatcher ? undefined : new Agent();
  const guarded =
    opts.allowPrivateRedirects || opts.dispatcher
      ? undefined
      : new Agent({ connect: { lookup: publicOnlyLookup } });
  try {
    let target = first;
    for (let hop = 0; ; hop++) {
      if (hop > 0 && !opts.allowPrivateRedirects) await assertPublicHost(target);
      const remaining = timeoutMs - (performance.now() - started);
      const res = await boundedRequest({
        method: "GET",
        url: target.toString(),
        // As upstream's fetcher asks (github.py `_fetch_pack`): a host may answer by content type.
        headers: { accept: "application/json" },
        timeoutMs: Math.max(1, Math.ceil(remaining)),
        maxBodyBytes: maxBytes,
        signal: opts.signal,
        dispatcher: hop > 0 && guarded ? guarded : (opts.dispatcher ?? own!),
        codePrefix: "pack_fetch",
      }).catch((err: unknown) => {
        throw refusedAddress(err) ?? err;
      });
      const location = [res.headers.location].flat()[0];
      if (REDIRECTS.has(res.status) && location !== undefined) {
        if (hop >= maxRedirects)
          throw new InputError(
            "pack_fetch_too_many_redirects",
            `pack URL redirected more than ${maxRedirects} times`,
            { detail: { status: res.status } },
          );
        let next: URL;
        try {
          next = new URL(location, target);
        } catch {
          throw new InputError("pack_fetch_failed", "pack URL redirected to something that is not a URL");
        }
        target = httpUrl(next.toString(), "pack_fetch_failed", "redirect target");
        continue;
      }
      if (res.status !== 200) {
        throw new InputError("pack_fetch_failed", `pack URL answered HTTP ${res.status}`, {
          retryable: res.status >= 500 || res.status === 429,
          detail: { status: res.status },
        });
      }
      // Never the URL, not even masked: a pack URL is secret until the epoch reveals it (github.py
      // logs packs by hash only); the caller's logger carries the pack hash.
      log.info(
        {
          bytes: res.body.byteLength,
          redirects: hop,
          ms: Math.round(performance.now() - started),
        },
        "pack.fetched",
      );
      return new Uint8Array(res.body.buffer, res.body.byteOffset, res.body.byteLength);
    }
  } catch (err) {
    if (err instanceof BodyTooLargeError) {
      throw new InputError("pack_too_large", `pack is larger than the fetch limit of ${maxBytes} bytes`, {
        cause: err,
        detail: err.detail,
      });
    }
    if (err instanceof ValidatorError && err.code !== "aborted") {
      log.warn({ code: err.code }, "pack.fetch_failed");
    }
    throw err;
  } finally {
    await Promise.all([own?.close(), guarded?.close()]);
  }
}

function httpUrl(raw: string, code: ErrorCode, what: string): URL {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new InputError(code, `${what} is not a URL`);
  }
  if (u.protocol !== "https:" && u.protocol !== "http:")
    throw new InputError(code, `${what} scheme ${u.protocol} is not http(s)`);
  return u;
}

const forbidden = (host: string, address: string) =>
  new InputError(
    "pack_fetch_forbidden_redirect",
    `the pack URL redirected to ${host} (${address}): not a public address`,
    { retryable: false, detail: { address } },
  );

/** Refuse a redirect target whose host is, or resolves to, a non-public address (before any socket). */
async function assertPublicHost(target: URL): Promise<void> {
  const host = target.hostname.replace(/^\[|\]$/g, "");
  if (isIP(host)) {
    if (!isPublicAddress(host)) throw forbidden(target.hostname, host);
    return;
  }
  let addresses: Array<{ address: string }>;
  try {
    addresses = await lookup(host, { all: true });
  } catch {
    return; // unresolvable: the request fails as unreachable, as it would have anyway
  }
  const bad = addresses.find((a) => !isPublicAddress(a.address));
  if (bad) throw forbidden(target.hostname, bad.address);
}

/** The guarded agent's lookup refused the connection: the same refusal, from the socket. */
function refusedAddress(err: unknown): InputError | undefined {
  for (let e = err as { cause?: unknown } | undefined, i = 0; e && i < 5; e = e.cause as typeof e, i++)
    if (e instanceof NonPublicAddressError) return forbidden(e.host, e.address);
  return undefined;
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
