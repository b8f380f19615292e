/**
 * Which network a row belongs to (migration 008): the genesis hash of its chain, `0x…`. The platform's
 * epoch ids are small sequential integers on every network, so an epoch, a verdict, a weights attempt
 * or a cached winner means something only together with its network; every repository of such rows
 * is opened for one network and never reads another's.
 */
import type { Db } from "./db.js";
import { KvRepo } from "./kv.js";

/** A chain's genesis hash, lower-case `0x` + 64 hex: the network's identity in this database. */
export type NetworkId = string;

/** Rows no network will ever read: a rehearsal's from before migration 008, and history that cannot be told apart. */
export const UNKNOWN_NETWORK = "unknown";
/** Rows from before migration 008 that the first daemon on a real network adopts (adoptUnclaimedRows). */
export const UNCLAIMED_NETWORK = "unclaimed";
/** A network no row belongs to: what a reader uses that must show no network's rows (its network unknown). */
export const NO_NETWORK = "none";

const GENESIS = /^0x[0-9a-f]{64}$/;

/** The network id of a genesis hash; anything else is a bug of the caller, not an operator's mistake. */
export function networkOf(genesisHash: string): NetworkId {
  const id = genesisHash.toLowerCase();
  if (!GENESIS.test(id)) throw new TypeError(`not a genesis hash: ${genesisHash}`);
  return id;
}

/** The tables whose rows before migration 008 a real network may adopt. */
const ADOPTABLE = [
  "platform_scored_epochs",
  "platform_outbox",
  "platform_log_uploads",
  "evaluations",
] as const;

/**
 * Hand the rows written before networks were recorded (and not recognisably a rehearsal's) to
 * `network`, once: the daemon calls this when it starts on a network it knows to be real (finney,
 * test), so an upgraded validator keeps its scored epochs and pending verdicts. A row whose key the
 * network already holds stays unclaimed (never read). Returns the rows adopted per table.
 */
export function adoptUnclaimedRows(db: Db, network: NetworkId): Record<string, number> {
  const out: Record<string, number> = {};
  db.transaction(() => {
    for (const table of ADOPTABLE) {
      const n = db
        .prepare(`UPDATE OR IGNORE ${table} SET network = ? WHERE network = ?`)
        .run(network, UNCLAIMED_NETWORK).changes;
      if (n > 0) out[table] = n;
    }
  })();
  return out;
}

const LAST_NETWORK_KEY = "daemon.network";

/** The network the last daemon started on (for `status` when no daemon answers). */
export interface LastNetwork {
  network: NetworkId;
  /** NETWORK as it was set: finney, test or local. */
  name: string;
  at: number;
}

export function recordLastNetwork(db: Db, last: LastNetwork): void {
  new KvRepo(db).set(LAST_NETWORK_KEY, last);
}

export function lastNetwork(db: Db): LastNetwork | undefined {
  return new KvRepo(db).get<LastNetwork>(LAST_NETWORK_KEY);
}
