/**
 * Which network's rows a daemon reads and writes (src/store/networks.ts): the genesis hash of the
 * chain it connected to, else — the endpoint down at start — the hash its NETWORK names (finney and
 * test have one; the connection later checks the endpoint serves it). A local chain has none to
 * name: until it answers, the daemon cannot know whose rows are its own, and waits (held, hold.ts).
 */
import { GENESIS_HASHES } from "../chain/index.js";
import type { Config } from "../config.js";
import { InfraError } from "../errors.js";
import { type Logger, safeUrl } from "../log.js";
import { adoptUnclaimedRows, type Db, type NetworkId, networkOf, recordLastNetwork } from "../store/index.js";

/** Pure: the network id, or undefined when only a connection could tell it (a local chain that is down). */
export function networkIdFor(config: Config, genesisHash: string | undefined): NetworkId | undefined {
  const genesis = genesisHash ?? GENESIS_HASHES[config.chain.network];
  return genesis === undefined ? undefined : networkOf(genesis);
}

/** A network whose genesis this build knows: one a real validator runs on (finney, test). */
export function isKnownNetwork(network: NetworkId): boolean {
  return Object.values(GENESIS_HASHES).some((g) => g !== undefined && networkOf(g) === network);
}

/**
 * The daemon's network at start: found, recorded as the last one this database ran on, and — on a
 * real network — given the rows from before networks were recorded.
 */
export function openNetwork(a: {
  db: Db;
  config: Config;
  genesisHash: string | undefined;
  log: Logger;
  now: number;
}): NetworkId {
  const network = networkIdFor(a.config, a.genesisHash);
  if (network === undefined)
    throw new InfraError(
      "local_chain_unreachable",
      `the local chain at ${safeUrl(a.config.chain.endpoint)} does not answer; its genesis hash names the network whose epochs, verdicts and weights are this daemon's, so the daemon starts once it answers (check SUBTENSOR_ENDPOINT, or start the localnet)`,
      { retryable: true },
    );
  if (isKnownNetwork(network)) {
    const adopted = adoptUnclaimedRows(a.db, network);
    if (Object.keys(adopted).length > 0) a.log.info({ genesis: network, adopted }, "store.rows_adopted");
  }
  recordLastNetwork(a.db, { network, name: a.config.chain.network, at: a.now });
  return network;
}
