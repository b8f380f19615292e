/**
 * One Docker engine of the pool, as a connection: the local socket, `tcp://` with TLS client
 * certificates, or `ssh://` (the engine's own `docker system dial-stdio` over SSH, as the docker CLI
 * does). Requests go through an agent of ours that knows every socket it opened, so an engine that
 * is cut off (no reset, just silence) can be severed at once: every request in flight fails, and
 * every new one fails without waiting for a TCP timeout, until the engine is restored. Every plain
 * request has a deadline from the start (`boundEngineCalls`): the pool's checks, sweeps and image
 * inspections never wait on an engine that accepts connections and does not answer.
 */
import { readFileSync } from "node:fs";
import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import type { Socket } from "node:net";
import Docker from "dockerode";
import { InfraError, InputError } from "../errors.js";
import { boundEngineCalls, dockerMessage } from "./docker.js";

/** The oldest engine API the sandbox uses (Docker 20.10). */
export const MIN_API_VERSION = "1.41";

export interface EngineEndpoint {
  /** `unix:///var/run/docker.sock`, `tcp://host:2376`, `ssh://user@host[:port]`. */
  url: string;
  /** tcp://: a directory with Docker's file names (ca.pem, cert.pem, key.pem). */
  tlsDir?: string;
  /** ssh://: a private key file (else the SSH agent at SSH_AUTH_SOCK). */
  sshKey?: string;
  /** ssh://: the agent socket (SSH_AUTH_SOCK). */
  sshAgent?: string;
}

export interface EngineConnection {
  readonly docker: Docker;
  readonly kind: "unix" | "tcp" | "ssh";
  /** The URL without credentials, for logs and the status page. */
  readonly label: string;
  /** Fail every request in flight and every new one with `reason` (an engine that went silent). */
  sever(reason: string): void;
  restore(): void;
  readonly severed: boolean;
}

type AgentBase = typeof HttpAgent | typeof HttpsAgent;

/** An http(s) agent that keeps its sockets, so they can all be destroyed together. */
function trackingAgent(Base: AgentBase, opts: ConstructorParameters<typeof HttpsAgent>[0]) {
  const sockets = new Set<Socket>();
  let severed: Error | undefined;
  class Tracking extends (Base as typeof HttpsAgent) {
    // biome-ignore lint/suspicious/noExplicitAny: Node's Agent hook is untyped.
    override createConnection(options: any, cb?: (err: Error | null, s: Socket) => void): any {
      if (severed) {
        const err = severed;
        process.nextTick(() => cb?.(err, undefined as unknown as Socket));
        return undefined;
      }
      // biome-ignore lint/suspicious/noExplicitAny: see above
      const s = (Base.prototype as any).createConnection.call(this, options, cb) as Socket | undefined;
      if (s) {
        sockets.add(s);
        s.once("close", () => sockets.delete(s));
        // Long streams (events, attach) idle for minutes: keepalives hold NAT and firewall state open.
        s.setKeepAlive(true, 15_000);
      }
      return s;
    }
  }
  const agent = new Tracking(opts);
  return {
    agent,
    sever(reason: string) {
      severed = Object.assign(new Error(reason), { code: "ENGINE_SEVERED" });
      for (const s of sockets) s.destroy(severed);
      sockets.clear();
    },
    restore() {
      severed = undefined;
    },
    get severed() {
      return severed !== undefined;
    },
  };
}

/** Parse an engine URL (pure). */
export function parseEngineUrl(
  url: string,
):
  | { kind: "unix"; socketPath: string }
  | { kind: "tcp"; host: string; port: number }
  | { kind: "ssh"; host: string; port: number; username: string | undefined } {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new InputError("engine_url_invalid", `${JSON.stringify(url)} is not an engine URL`);
  }
  if (u.protocol === "unix:") {
    const path = decodeURIComponent(u.pathname);
    if (!path.startsWith("/"))
      throw new InputError("engine_url_invalid", `${url}: a unix socket needs an absolute path`);
    return { kind: "unix", socketPath: path };
  }
  if (u.protocol === "tcp:") {
    if (!u.hostname || !u.port)
      throw new InputError("engine_url_invalid", `${url}: tcp:// needs a host and a port (tcp://host:2376)`);
    return { kind: "tcp", host: u.hostname.replace(/^\[|\]$/g, ""), port: Number(u.port) };
  }
  if (u.protocol === "ssh:") {
    if (!u.hostname) throw new InputError("engine_url_invalid", `${url}: ssh:// needs a host`);
    return {
      kind: "ssh",
      host: u.hostname.replace(/^\[|\]$/g, ""),
      port: u.port ? Number(u.port) : 22,
      username: u.username ? decodeURIComponent(u.username) : undefined,
    };
  }
  throw new InputError(
    "engine_url_invalid",
    `${url}: an engine is unix:///path, tcp://host:port (TLS) or ssh://user@host`,
  );
}

function readPem(dir: string, file: string): Buffer {
  const path = `${dir.replace(/\/+$/, "")}/${file}`;
  try {
    return readFileSync(path);
  } catch (err) {
    throw new InputError(
      "engine_tls_unreadable",
      `${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
}

export function connectEngine(ep: EngineEndpoint): EngineConnection {
  const u = parseEngineUrl(ep.url);
  if (u.kind === "unix") {
    const t = trackingAgent(HttpAgent, { keepAlive: true });
    const docker = boundEngineCalls(
      new Docker({ socketPath: u.socketPath, agent: t.agent } as Docker.DockerOptions),
    );
    return {
      docker,
      kind: "unix",
      label: ep.url,
      sever: t.sever,
      restore: t.restore,
      get severed() {
        return t.severed;
      },
    };
  }
  if (u.kind === "tcp") {
    if (!ep.tlsDir)
      throw new InputError(
        "engine_tls_missing",
        `${ep.url}: a tcp:// engine needs TLS client certificates (tls=DIR with ca.pem, cert.pem, key.pem); the plain Docker API is root on that host for anyone who reaches it`,
      );
    const ca = readPem(ep.tlsDir, "ca.pem");
    const cert = readPem(ep.tlsDir, "cert.pem");
    const key = readPem(ep.tlsDir, "key.pem");
    const t = trackingAgent(HttpsAgent, { keepAlive: true, ca, cert, key });
    const docker = boundEngineCalls(
      new Docker({
        protocol: "https",
        host: u.host,
        port: u.port,
        ca,
        cert,
        key,
        agent: t.agent,
      } as Docker.DockerOptions),
    );
    return {
      docker,
      kind: "tcp",
      label: ep.url,
      sever: t.sever,
      restore: t.restore,
      get severed() {
        return t.severed;
      },
    };
  }
  // ssh: docker-modem opens one SSH connection per request (its own agent); keepalives bound how
  // long a silent host can hold a request. Severing is then the pool's abort signals' job.
  let privateKey: Buffer | undefined;
  if (ep.sshKey) {
    try {
      privateKey = readFileSync(ep.sshKey);
    } catch (err) {
      throw new InputError(
        "engine_ssh_key_unreadable",
        `${ep.sshKey}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  }
  const docker = boundEngineCalls(
    new Docker({
      protocol: "ssh",
      host: u.host,
      port: u.port,
      ...(u.username ? { username: u.username } : {}),
      sshOptions: {
        ...(privateKey ? { privateKey } : {}),
        ...(ep.sshAgent ? { agent: ep.sshAgent } : {}),
        keepaliveInterval: 5_000,
        keepaliveCountMax: 3,
        readyTimeout: 15_000,
      },
    } as Docker.DockerOptions),
  );
  let severed = false;
  return {
    docker,
    kind: "ssh",
    label: `ssh://${u.username ? `${u.username}@` : ""}${u.host}:${u.port}`,
    sever() {
      severed = true;
    },
    restore() {
      severed = false;
    },
    get severed() {
      return severed;
    },
  };
}

/** "1.41" ≥ "1.40" (pure). */
export function apiAtLeast(have: string, want: string): boolean {
  const a = have.split(".").map(Number);
  const b = want.split(".").map(Number);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    if (!Number.isFinite(x)) return false;
    if (x !== y) return x > y;
  }
  return true;
}

export interface EngineFacts {
  version: string;
  apiVersion: string;
  os: string;
  arch: string;
  name: string;
}

/**
 * Reachable, answering, recent enough, Linux: what every engine of the pool must be. Each problem
 * becomes an InfraError whose message says what to change.
 */
export async function probeEngine(docker: Docker, timeoutMs = 10_000): Promise<EngineFacts> {
  const signal = AbortSignal.timeout(timeoutMs);
  type WithSignal = (o: { abortSignal: AbortSignal }) => Promise<unknown>;
  try {
    await (docker.ping as unknown as WithSignal).call(docker, { abortSignal: signal });
  } catch (err) {
    throw new InfraError(
      "engine_unreachable",
      `does not answer (${signal.aborted ? `no answer within ${timeoutMs / 1000} s` : dockerMessage(err)})`,
      { cause: err },
    );
  }
  let v: { Version?: string; ApiVersion?: string; Os?: string; Arch?: string };
  try {
    v = (await (docker.version as unknown as WithSignal).call(docker, { abortSignal: signal })) as typeof v;
  } catch (err) {
    throw new InfraError("engine_unreachable", `GET /version failed: ${dockerMessage(err)}`, { cause: err });
  }
  const facts: EngineFacts = {
    version: v.Version ?? "unknown",
    apiVersion: v.ApiVersion ?? "0",
    os: v.Os ?? "unknown",
    arch: v.Arch ?? "unknown",
    name: "",
  };
  if (!apiAtLeast(facts.apiVersion, MIN_API_VERSION))
    throw new InfraError(
      "engine_too_old",
      `Docker ${facts.version} speaks API ${facts.apiVersion}; the sandbox needs ${MIN_API_VERSION} (Docker 20.10) or newer`,
      { retryable: false },
    );
  if (facts.os !== "linux")
    throw new InfraError("engine_not_linux", `the engine runs ${facts.os} containers; episodes need linux`, {
      retryable: false,
    });
  return facts;
}
