/** What opens a pool: its engines, its timings, and who hears about them. */
import type { BenchProgress } from "../bench/index.js";
import type { EngineConfig } from "../config.js";
import type { Logger } from "../log.js";
import type { BuiltImage, Docker, EpisodeRuntimeSetting } from "../sandbox/index.js";
import type { KvRepo } from "../store/index.js";
import type { EngineView } from "./engine.js";

/** Who hears about engines (LiveStatus satisfies it). */
export interface PoolObserver {
  raise(code: string, message: string, severity?: "warn" | "error"): void;
  clear?(code: string): void;
  setEngines?(views: EngineView[]): void;
  benchProgress?(p: BenchProgress): void;
}

export interface PoolOptions {
  engines: readonly EngineConfig[];
  /** ENGINES was set. Otherwise the one default engine runs as before: no heartbeat, no drains. */
  explicit: boolean;
  sshAgent?: string | undefined;
  poolCidr: string;
  /** DAEMON_IN_CONTAINER, for engines on this host (unix://). */
  daemonInContainer?: boolean | undefined;
  log: Logger;
  observer?: PoolObserver;
  /** Drain flags (`engines drain NAME`). */
  kv?: Pick<KvRepo, "get">;
  /** The meter relay image, built on the first engine (`docker`); needed once an engine is not on this host. */
  relayImage?: (docker: Docker, signal?: AbortSignal) => Promise<BuiltImage>;
  /**
   * Ping period of explicit pools (default 5 s); an engine that has not answered one for
   * `lostAfterMs` (default 25 s, two misses at least) is lost. 0: no heartbeat.
   */
  heartbeatMs?: number;
  lostAfterMs?: number;
  /** First probe delay of an engine that is down (doubling to 30 s). */
  probeBaseMs?: number;
  drainPollMs?: number;
  /** A check (or a probe) taking longer than this fails (default 180 s: the first relay copy). */
  checkTimeoutMs?: number;
  /** Episodes waiting while no engine is ready fail (infra) after this long (default 10 min). */
  noEngineMs?: number;
  /** An episode still running this long after its engine was lost is given up (default 60 s). */
  abandonAfterLossMs?: number;
  reapIntervalMs?: number;
  /** Sandbox firewall; "off" only where the operator chose it. */
  firewall?: "iptables" | "off";
  /**
   * EPISODE_RUNTIME, resolved on each engine at every check: an engine without the runtime asked
   * for fails its check; `auto` on one without gVisor runs runc there, with an alarm.
   */
  episodeRuntime: EpisodeRuntimeSetting;
}
