/**
 * Drained engines, in the database: `trajrl-validator engines drain NAME` writes the flag, the pool
 * of every process on that database reads it every few seconds (no new episodes there; running ones
 * finish), and it outlives restarts until `engines resume NAME`.
 */
import { z } from "zod";
import type { KvRepo } from "../store/index.js";

const KEY = "engines.drained";
const Drained = z.record(z.string(), z.object({ at: z.string() }));
export type DrainedEngines = z.infer<typeof Drained>;

export function readDrained(kv: Pick<KvRepo, "get">): DrainedEngines {
  const r = Drained.safeParse(kv.get<unknown>(KEY) ?? {});
  return r.success ? r.data : {};
}

export function setDrained(kv: Pick<KvRepo, "get" | "set">, name: string, drained: boolean): DrainedEngines {
  const now = readDrained(kv);
  if (drained) now[name] = { at: new Date().toISOString() };
  else delete now[name];
  kv.set(KEY, now);
  return now;
}
