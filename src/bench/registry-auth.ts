/**
 * Credentials for a private bench registry, as the Docker CLI keeps them: the `auths` section of
 * the Docker config file (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`), each entry a
 * base64 `user:password` under the registry's host; or REGISTRY_USERNAME / REGISTRY_PASSWORD for
 * the bench image's registry. Credential helpers (`credsStore`) are not consulted. Public
 * registries need none.
 */
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import type { RegistryAuth } from "../sandbox/index.js";

/** The registry host of an image reference (`docker.io` when the first part is not a host). */
export function registryOf(ref: string): string {
  const first = ref.split("/")[0]!;
  const isHost = ref.includes("/") && (first.includes(".") || first.includes(":") || first === "localhost");
  return isHost ? first : "docker.io";
}

const DockerConfig = z.object({
  auths: z
    .record(
      z.string(),
      z.object({
        auth: z.string().optional(),
        username: z.string().optional(),
        password: z.string().optional(),
      }),
    )
    .optional(),
});

/** The entry for `host` in a Docker config file's text, if any (keys may carry a scheme or a path). */
export function authFromDockerConfig(text: string, host: string): RegistryAuth | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  const cfg = DockerConfig.safeParse(raw);
  if (!cfg.success || !cfg.data.auths) return undefined;
  for (const [key, entry] of Object.entries(cfg.data.auths)) {
    const keyHost = key.replace(/^https?:\/\//, "").split("/")[0];
    if (keyHost !== host) continue;
    if (entry.username && entry.password)
      return { username: entry.username, password: entry.password, serveraddress: host };
    if (entry.auth) {
      const decoded = Buffer.from(entry.auth, "base64").toString("utf8");
      const i = decoded.indexOf(":");
      if (i > 0)
        return { username: decoded.slice(0, i), password: decoded.slice(i + 1), serveraddress: host };
    }
  }
  return undefined;
}

/** Credentials for `ref`'s registry: the explicit pair first, else the Docker config file. */
export async function registryAuthFor(
  ref: string,
  opts: {
    username?: string | undefined;
    password?: string | undefined;
    dockerConfigDir?: string | undefined;
  },
): Promise<RegistryAuth | undefined> {
  return registryAuthForHost(registryOf(ref), opts);
}

/** Credentials for the registry at `host`: the explicit pair first, else the Docker config file. */
export async function registryAuthForHost(
  host: string,
  opts: {
    username?: string | undefined;
    password?: string | undefined;
    dockerConfigDir?: string | undefined;
  },
): Promise<RegistryAuth | undefined> {
  if (opts.username && opts.password)
    return { username: opts.username, password: opts.password, serveraddress: host };
  const dir = opts.dockerConfigDir ?? join(homedir(), ".docker");
  const text = await readFile(join(dir, "config.json"), "utf8").catch(() => undefined);
  return text === undefined ? undefined : authFromDockerConfig(text, host);
}
