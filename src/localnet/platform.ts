/**
 * A fake TrajectoryRL platform: a real HTTP server (loopback unless told otherwise) speaking the v6 validator protocol
 * with the documented JSON shapes (src/platform/README.md). Every signed request is verified with
 * @polkadot/util-crypto signatureVerify against the message the endpoint documents, so a client
 * that signs the wrong message is refused (401) exactly as the real server would.
 *
 * It opens and closes challenge epochs, serves each epoch's pack itself (/packs/<token>.json),
 * can inject faults (an HTTP status, a malformed body, a hang, a reset) per route, and records
 * everything it received. Routes and HTTP: platform-routes.ts; authentication: platform-auth.ts;
 * log uploads: platform-logs.ts.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { packHashOf, pyJsonParseBytes } from "../pack/index.js";
import { type AuthPolicy, authenticate } from "./platform-auth.js";
import { type FilteredVote, filterVotes, finalizedWinnerResponse } from "./platform-finalize.js";
import { logUpload, type ReceivedLog } from "./platform-logs.js";
import {
  type FakeRoute,
  type Fault,
  parseJsonObject,
  type Received,
  readBody,
  routeOf,
  send,
} from "./platform-routes.js";

export type { FakeRoute, Fault, Received } from "./platform-routes.js";

import {
  challengeScoreMessage,
  epochCurrentMessage,
  heartbeatMessage,
  scenarioProgressMessage,
  scoreBodySchema,
  verifierReady,
} from "../platform/index.js";

export interface FakeEpoch {
  challenge_epoch_id: number;
  challenger_hotkey: string;
  challenger_uid: number | null;
  challenger_pack_hash: string;
  challenger_pack_url: string | null;
  start_block: number;
  end_block: number;
  status: "in_progress" | "finalized";
  created_at: string;
  spec_number: number | null;
  elapsed_blocks: number | null;
  /** URL visible without a validator signature (the API's ">24 h" rule). */
  public_url: boolean;
}

export interface OpenEpochOptions {
  /** The pack object (served and hashed Python-canonically) or raw bytes. */
  pack?: unknown;
  packBytes?: Uint8Array;
  /** Override the announced hash (e.g. to make verification fail). */
  packHash?: string;
  /** Announce this URL instead of the fake's own (null: the epoch has no pack URL). */
  packUrl?: string | null;
  challengerHotkey?: string;
  challengerUid?: number | null;
  specNumber?: number | null;
  startBlock?: number;
  lengthBlocks?: number;
  elapsedBlocks?: number | null;
  publicUrl?: boolean;
  /** The epoch's id (default: the next of 1000, 1001, …; later epochs count on from it). */
  epochId?: number;
}

export interface FakePlatformOptions {
  /** Where to listen: loopback and any free port unless told. */
  host?: string;
  port?: number;
  /** The host name clients reach this server by (pack URLs are announced under it); default its own. */
  publicHost?: string;
  /** Hotkeys registered as validators; undefined accepts any hotkey whose signature verifies. */
  validators?: Iterable<string>;
  /** The server's wall clock (ms) for the ±5 min timestamp check. */
  now?: () => number;
  driftSeconds?: number;
  /** The platform's `min_supported` validator version: older votes are dropped at finalize (step [6]). */
  minSupportedVersion?: string;
}

export class FakePlatform {
  readonly received: Received[] = [];
  /** Accepted score bodies per epoch id. */
  readonly scores = new Map<number, Record<string, unknown>[]>();
  readonly heartbeats: Record<string, unknown>[] = [];
  readonly progress: Record<string, unknown>[] = [];
  readonly logs: ReceivedLog[] = [];
  /** Rows the submission filter dropped at finalize, per epoch id (platform-finalize.ts). */
  readonly filtered = new Map<number, FilteredVote[]>();
  minSupportedVersion: string | undefined;
  /** The body of GET /api/v2/winner/current (null: 404). */
  winnerResponse: unknown = { success: true, winner: null, finalized_epoch: null, submissions: [] };

  private epochs = new Map<number, FakeEpoch>();
  private current: FakeEpoch | null = null;
  private nextId = 1000;
  private packs = new Map<string, Buffer>();
  private faults = new Map<FakeRoute, Fault[]>();
  private sockets = new Set<Socket>();
  private timers = new Set<NodeJS.Timeout>();
  private validators: Set<string> | undefined;
  private readonly now: () => number;
  private readonly drift: number;

  /** Base of the pack URLs it announces (FakePlatformOptions.publicUrl). */
  readonly publicUrl: string;

  private constructor(
    private readonly server: Server,
    readonly url: string,
    opts: FakePlatformOptions,
  ) {
    const u = new URL(url);
    if (opts.publicHost) u.hostname = opts.publicHost;
    this.publicUrl = u.origin;
    this.validators = opts.validators ? new Set(opts.validators) : undefined;
    this.now = opts.now ?? Date.now;
    this.drift = opts.driftSeconds ?? 300;
    this.minSupportedVersion = opts.minSupportedVersion;
  }

  static async start(opts: FakePlatformOptions = {}): Promise<FakePlatform> {
    await verifierReady();
    let fake: FakePlatform | undefined;
    const server = createServer((req, res) => {
      fake!.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) send(res, 500, { success: false, error: `fake platform bug: ${String(err)}` });
      });
    });
    const host = opts.host ?? "127.0.0.1";
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(opts.port ?? 0, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    const { port } = server.address() as AddressInfo;
    const shown = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
    fake = new FakePlatform(server, `http://${shown}:${port}`, opts);
    server.on("connection", (s) => {
      fake!.sockets.add(s);
      s.on("close", () => fake!.sockets.delete(s));
    });
    return fake;
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  setValidators(hotkeys: Iterable<string> | undefined): void {
    this.validators = hotkeys ? new Set(hotkeys) : undefined;
  }

  /** Queue `fault` for the next `times` requests on `route`. */
  inject(route: FakeRoute, fault: Fault, times = 1): void {
    const q = this.faults.get(route) ?? [];
    for (let k = 0; k < times; k++) q.push(fault);
    this.faults.set(route, q);
  }

  /** Drop the queued faults of one route, or of every route. */
  clearFaults(route?: FakeRoute): void {
    if (route) this.faults.delete(route);
    else this.faults.clear();
  }

  /** Serve bytes at a fresh unguessable URL on this server. */
  servePack(bytes: Uint8Array): string {
    const token = randomBytes(8).toString("hex");
    this.packs.set(token, Buffer.from(bytes));
    return `${this.publicUrl}/packs/${token}.json`;
  }

  /** Open a new in-progress epoch (closing the current one, as the scheduler would). */
  openEpoch(o: OpenEpochOptions = {}): FakeEpoch {
    if (this.current) this.closeEpoch();
    const bytes = o.packBytes
      ? Buffer.from(o.packBytes)
      : Buffer.from(JSON.stringify(o.pack ?? { schema_version: 1, files: { "SKILL.md": "# fake pack\n" } }));
    const hash = o.packHash ?? packHashOf(pyJsonParseBytes(bytes));
    const url = o.packUrl === undefined ? this.servePack(bytes) : o.packUrl;
    const start = o.startBlock ?? 5_300_000;
    const epoch: FakeEpoch = {
      challenge_epoch_id: o.epochId ?? this.nextId,
      challenger_hotkey: o.challengerHotkey ?? "5FakeChallengerHotkey",
      challenger_uid: o.challengerUid ?? 7,
      challenger_pack_hash: hash,
      challenger_pack_url: url,
      start_block: start,
      end_block: start + (o.lengthBlocks ?? 150),
      status: "in_progress",
      created_at: new Date(this.now()).toISOString(),
      spec_number: o.specNumber === undefined ? 1 : o.specNumber,
      elapsed_blocks: o.elapsedBlocks === undefined ? 10 : o.elapsedBlocks,
      public_url: o.publicUrl ?? false,
    };
    this.nextId = epoch.challenge_epoch_id + 1;
    this.epochs.set(epoch.challenge_epoch_id, epoch);
    this.current = epoch;
    return epoch;
  }

  /** Finalize the current epoch: later score POSTs for it get 409 "epoch is finalized". */
  closeEpoch(): void {
    if (this.current) this.current.status = "finalized";
    this.current = null;
  }

  /** Close the current epoch as the scheduler's finalize does: filter its votes, publish the survivors. */
  finalizeEpoch(): void {
    const e = this.current;
    if (!e) return;
    this.closeEpoch();
    const votes = filterVotes(this.scores.get(e.challenge_epoch_id) ?? [], this.minSupportedVersion);
    this.filtered.set(e.challenge_epoch_id, votes.filtered);
    const at = new Date(this.now()).toISOString();
    this.winnerResponse = finalizedWinnerResponse(e, votes.counted, this.winnerResponse, at);
  }

  epoch(id: number): FakeEpoch | undefined {
    return this.epochs.get(id);
  }

  get currentEpoch(): FakeEpoch | null {
    return this.current;
  }

  /** Requests on a route, in arrival order. */
  requests(route: FakeRoute): Received[] {
    return this.received.filter((r) => r.route === route);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const u = new URL(req.url ?? "/", this.url);
    const route = routeOf(req.method ?? "GET", u.pathname);
    const rec: Received = {
      route: route?.name ?? "unknown",
      method: req.method ?? "GET",
      path: u.pathname,
      query: Object.fromEntries(u.searchParams),
      body: undefined,
      status: 0,
      at: this.now(),
      userAgent: req.headers["user-agent"] ?? null,
    };
    this.received.push(rec);
    const raw = await readBody(req);
    if (raw === null) {
      rec.status = 413;
      return send(res, 413, { success: false, error: "body too large" });
    }
    if (!route) {
      rec.status = 404;
      return send(res, 404, { success: false, error: "not found" });
    }

    const fault = this.faults.get(route.name)?.shift();
    if (fault?.kind === "reset") {
      rec.status = -1;
      req.socket.destroy();
      return;
    }
    if (fault?.kind === "status") {
      rec.status = fault.status;
      res.writeHead(fault.status, { "content-type": "application/json" });
      res.end(fault.body ?? JSON.stringify({ success: false, error: `injected ${fault.status}` }));
      return;
    }
    if (fault?.kind === "malformed") {
      rec.status = fault.status ?? 200;
      res.writeHead(rec.status, { "content-type": "application/json" });
      res.end(fault.body);
      return;
    }
    if (fault?.kind === "hang" && !fault.accept) {
      await this.sleep(fault.ms);
    }

    const answer = await this.dispatch(route, req, raw, u, rec);
    rec.status = answer.status;
    if (fault?.kind === "hang" && fault.accept) await this.sleep(fault.ms);
    if (res.destroyed) return;
    if (answer.bytes) {
      res.writeHead(answer.status, {
        "content-type": "application/json",
        "content-length": answer.bytes.length,
      });
      res.end(answer.bytes);
    } else send(res, answer.status, answer.json);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        resolve();
      }, ms);
      this.timers.add(t);
    });
  }

  private async dispatch(
    route: { name: FakeRoute; id?: number; token?: string },
    req: IncomingMessage,
    raw: Buffer,
    u: URL,
    rec: Received,
  ): Promise<{ status: number; json?: unknown; bytes?: Buffer }> {
    switch (route.name) {
      case "pack": {
        const bytes = this.packs.get(route.token ?? "");
        return bytes ? { status: 200, bytes } : { status: 404, json: { error: "no such pack" } };
      }
      case "winner.current":
        return this.winnerResponse === null
          ? { status: 404, json: { success: false, error: "no winner" } }
          : { status: 200, json: this.winnerResponse };
      case "epoch.current":
        return this.epochCurrent(u, rec);
      case "epoch.score":
        return this.score(route.id!, raw, rec);
      case "epoch.scenario_progress":
        return this.scenarioProgress(route.id!, raw, rec);
      case "validators.heartbeat":
        return this.heartbeat(raw, rec);
      case "logs.upload":
      case "logs.cycle":
        return logUpload(route.name, req, raw, rec, this.auth, this.logs);
    }
  }

  private get auth(): AuthPolicy {
    return { validators: this.validators, now: this.now, driftSeconds: this.drift };
  }

  private authenticate(
    hotkey: unknown,
    timestamp: unknown,
    signature: unknown,
    message: (hk: string, ts: number) => string,
    rec: Received,
  ): { status: number; error: string } | null {
    return authenticate(this.auth, hotkey, timestamp, signature, message, rec);
  }

  private epochCurrent(u: URL, rec: Received): { status: number; json: unknown } {
    const q = u.searchParams;
    let unlocked = false;
    if (q.has("signature")) {
      // Soft fall-through: a bad signature hides the URL, it never errors (docs/API.md).
      const denied = this.authenticate(
        q.get("hotkey"),
        q.get("timestamp"),
        q.get("signature"),
        epochCurrentMessage,
        rec,
      );
      unlocked = denied === null;
    }
    const e = this.current;
    if (!e) return { status: 404, json: { success: false, error: "no epoch in progress" } };
    const showUrl = unlocked || e.public_url;
    const epoch: Record<string, unknown> = {
      challenge_epoch_id: e.challenge_epoch_id,
      challenger_hotkey: e.challenger_hotkey,
      challenger_uid: e.challenger_uid,
      challenger_pack_hash: e.challenger_pack_hash,
      start_block: e.start_block,
      end_block: e.end_block,
      epoch_length_blocks: e.end_block - e.start_block,
      status: e.status,
      created_at: e.created_at,
      spec_number: e.spec_number,
    };
    if (showUrl) epoch.challenger_pack_url = e.challenger_pack_url;
    const current = e.elapsed_blocks === null ? null : e.start_block + e.elapsed_blocks;
    return {
      status: 200,
      json: {
        success: true,
        epoch,
        winner: null,
        current_block: current,
        elapsed_blocks: e.elapsed_blocks,
        remaining_blocks: current === null ? null : Math.max(0, e.end_block - current),
      },
    };
  }

  private score(id: number, raw: Buffer, rec: Received): { status: number; json: unknown } {
    const body = parseJsonObject(raw);
    rec.body = body;
    if (!body) return { status: 400, json: { success: false, error: "Request body must be a JSON object" } };
    if (!(id > 0))
      return {
        status: 400,
        json: { success: false, error: "challenge_epoch_id must be a positive integer" },
      };
    const parsed = scoreBodySchema.safeParse(body);
    if (!parsed.success) {
      return {
        status: 400,
        json: { success: false, error: parsed.error.issues.map((i) => i.message).join("; ") },
      };
    }
    const denied = this.authenticate(
      body.validator_hotkey,
      body.timestamp,
      body.signature,
      (hk, ts) => challengeScoreMessage(hk, ts, id),
      rec,
    );
    if (denied) return { status: denied.status, json: { success: false, error: denied.error } };
    const e = this.epochs.get(id);
    if (!e) return { status: 404, json: { success: false, error: "challenge epoch not found" } };
    if (e.status !== "in_progress")
      return { status: 409, json: { success: false, error: "epoch is finalized" } };
    const got = this.scores.get(id) ?? [];
    if (got.some((s) => s.validator_hotkey === body.validator_hotkey)) {
      return { status: 409, json: { success: false, error: "duplicate submission for this epoch" } };
    }
    got.push(body);
    this.scores.set(id, got);
    return {
      status: 200,
      json: {
        success: true,
        challenge_epoch_id: id,
        validator_hotkey: body.validator_hotkey,
        challenger: { hotkey: e.challenger_hotkey, pack_hash: e.challenger_pack_hash },
        winner: null,
        block_height: e.start_block + (e.elapsed_blocks ?? 0),
      },
    };
  }

  private scenarioProgress(id: number, raw: Buffer, rec: Received): { status: number; json: unknown } {
    const body = parseJsonObject(raw);
    rec.body = body;
    if (!body) return { status: 400, json: { success: false, error: "Request body must be a JSON object" } };
    const name = body.scenario_name;
    if (typeof name !== "string" || name === "")
      return { status: 400, json: { success: false, error: "scenario_name is required" } };
    const denied = this.authenticate(
      body.validator_hotkey,
      body.timestamp,
      body.signature,
      (hk, ts) => scenarioProgressMessage(hk, ts, id, name),
      rec,
    );
    if (denied) return { status: denied.status, json: { success: false, error: denied.error } };
    if (!this.epochs.has(id))
      return { status: 404, json: { success: false, error: "challenge epoch not found" } };
    this.progress.push({ challenge_epoch_id: id, ...body });
    return { status: 200, json: { success: true } };
  }

  private heartbeat(raw: Buffer, rec: Received): { status: number; json: unknown } {
    const body = parseJsonObject(raw);
    rec.body = body;
    if (!body) return { status: 400, json: { success: false, error: "Request body must be a JSON object" } };
    if (typeof body.version !== "string" || body.version === "") {
      return {
        status: 400,
        json: { success: false, error: "version is required and must be a non-empty string" },
      };
    }
    const denied = this.authenticate(body.hotkey, body.timestamp, body.signature, heartbeatMessage, rec);
    if (denied) return { status: denied.status, json: { success: false, error: denied.error } };
    this.heartbeats.push(body);
    const iso = (s: unknown) => (typeof s === "number" ? new Date(s * 1000).toISOString() : null);
    return {
      status: 200,
      json: {
        success: true,
        validator: {
          hotkey: body.hotkey,
          version: body.version,
          lastSeen: new Date(this.now()).toISOString(),
          lastSetWeightsAt: iso(body.last_set_weights_at),
          lastEvalAt: iso(body.last_eval_at),
        },
      },
    };
  }
}
