/**
 * The checks an engine passes before it takes episodes, at start and at every probe: it answers, its
 * API is recent enough, it runs Linux; an engine not on this host gets the meter relay image; its
 * sandbox starts (episode runtime resolved against its runtimes, episode firewall installed and read
 * back, a sweep). All within a time limit.
 */
import { type BuiltImage, type Docker, probeEngine, Sandbox } from "../sandbox/index.js";
import { type PoolEngine, withTimeout } from "./engine.js";
import type { EngineImages } from "./images.js";
import type { PoolOptions } from "./options.js";

export interface CheckHost {
  opts: PoolOptions;
  /** The meter relay image, built once on the first engine. */
  relayImage(): Promise<BuiltImage>;
  images: EngineImages;
  /** This host's engine, if the pool has one: owner containers live there. */
  localDocker: Docker | null;
  /** The engine's event stream ended (explicit pools only). */
  onLost(): void;
}

/** `auto` found no gVisor on this engine: its episodes run under runc, which the operator must see. */
function reportRuntime(e: PoolEngine, host: CheckHost): void {
  const code = `engine_runc:${e.cfg.name}`;
  const fallback = e.sandbox?.episodeRuntime?.fallback;
  if (fallback) host.opts.observer?.raise(code, `engine ${e.cfg.name}: ${fallback}`, "warn");
  else host.opts.observer?.clear?.(code);
}

export async function checkEngine(e: PoolEngine, host: CheckHost): Promise<void> {
  const conn = e.conn!;
  await withTimeout(
    (async () => {
      const facts = await probeEngine(conn.docker);
      e.version = facts.version;
      let relayRef: string | undefined;
      if (e.remote) {
        const relay = await host.relayImage();
        await host.images.ensureImagesOn(e, [relay], {});
        relayRef = relay.ref;
      }
      e.sandbox ??= Sandbox.create({
        docker: conn.docker,
        poolCidr: host.opts.poolCidr,
        log: e.log.child({ component: "sandbox" }),
        ...(host.opts.firewall ? { firewall: host.opts.firewall } : {}),
        ...(host.opts.reapIntervalMs !== undefined ? { reapIntervalMs: host.opts.reapIntervalMs } : {}),
        ...(relayRef ? { remote: { relayImage: relayRef } } : {}),
        ...(!e.remote && host.opts.daemonInContainer !== undefined
          ? { daemonInContainer: host.opts.daemonInContainer }
          : {}),
        // Owner containers (a daemon in a container) live on this host's engine, if there is one.
        ownerDocker: e.remote ? host.localDocker : conn.docker,
        episodeRuntime: host.opts.episodeRuntime,
      });
      if (host.opts.explicit) e.sandbox.engineWatch.onLost = host.onLost;
      await e.sandbox.start();
      reportRuntime(e, host);
    })(),
    host.opts.checkTimeoutMs ?? 180_000,
    () => conn.sever("the engine's check timed out"),
    `checking engine ${e.cfg.name}`,
  );
}
