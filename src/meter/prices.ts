/**
 * The allowlist and the frozen price table (repo root: allowlist.json, price-table.json), parsed with
 * zod at start. A model on the allowlist without a price fails closed: the meter refuses to start
 * rather than forward calls it cannot bill.
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import { InputError } from "../errors.js";
import { sha256Hex } from "../hash.js";
import { canonicalJson, fromJs } from "../pack/index.js";
import { ALLOWLIST_FILE, PRICE_TABLE_FILE } from "../repo.js";
import { type Pico, pricePerMillionToPico } from "./money.js";

const modelId = z.string().min(1).max(200);

const allowlistSchema = z
  .object({
    spec: z.number().int().nonnegative().optional(),
    models: z.array(modelId).min(1),
  })
  .strict()
  .refine((a) => new Set(a.models).size === a.models.length, { message: "duplicate model ids" });

/** A price must be an exact number of pico-dollars per token (≤ 6 decimals of USD per 1M). */
// ≤ $1000 per 1M tokens keeps any cost of a call (≤ 2·10^9 tokens of usage) inside SQLite's int64.
const usdPerMillion = z
  .number()
  .nonnegative()
  .max(1000)
  .refine(
    (x) => {
      try {
        pricePerMillionToPico(x);
        return true;
      } catch {
        return false;
      }
    },
    { message: "more than 6 decimals" },
  );

const modelPriceSchema = z
  .object({ prompt: usdPerMillion, completion: usdPerMillion, cache_read: usdPerMillion })
  .strict();

const priceTableSchema = z
  .object({
    spec: z.number().int().nonnegative().optional(),
    currency: z.literal("USD").optional(),
    unit: z.literal("per_1m_tokens").optional(),
    models: z.record(modelId, modelPriceSchema),
  })
  .strict();

export type Allowlist = z.infer<typeof allowlistSchema>;
export type PriceTable = z.infer<typeof priceTableSchema>;
export type ModelPriceUsd = z.infer<typeof modelPriceSchema>;

/** Per-token prices in pico-dollars, what the ledger computes with. */
export interface ModelPrice {
  prompt: Pico;
  completion: Pico;
  cacheRead: Pico;
}

function readJson(path: string, what: "allowlist" | "price table"): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new InputError(
      "file_not_readable",
      `${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new InputError(
      what === "allowlist" ? "allowlist_invalid" : "price_table_invalid",
      `${what} ${path}: ${(err as Error).message}`,
    );
  }
}

function issues(err: z.ZodError): string {
  return err.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
}

export function parseAllowlist(value: unknown, source = "allowlist"): Allowlist {
  const r = allowlistSchema.safeParse(value);
  if (!r.success) throw new InputError("allowlist_invalid", `${source}: ${issues(r.error)}`);
  return r.data;
}

export function parsePriceTable(value: unknown, source = "price table"): PriceTable {
  const r = priceTableSchema.safeParse(value);
  if (!r.success) throw new InputError("price_table_invalid", `${source}: ${issues(r.error)}`);
  return r.data;
}

export function loadAllowlist(path: string = ALLOWLIST_FILE): Allowlist {
  return parseAllowlist(readJson(path, "allowlist"), path);
}

export function loadPriceTable(path: string = PRICE_TABLE_FILE): PriceTable {
  return parsePriceTable(readJson(path, "price table"), path);
}

/**
 * sha256 of the table's canonical JSON (Python `json.dumps(sort_keys=True)` form, as pack hashes),
 * so formatting of the file does not change it but any price or model does.
 */
export function priceTableHash(prices: PriceTable): string {
  return sha256Hex(Buffer.from(canonicalJson(fromJs(prices)), "utf8"));
}

/** The per-token prices of every allowlisted model; throws when one has none (fail closed). */
export function compilePrices(allowlist: Allowlist, prices: PriceTable): Map<string, ModelPrice> {
  const missing = allowlist.models.filter((m) => !Object.hasOwn(prices.models, m));
  if (missing.length > 0)
    throw new InputError("price_missing", `allowlisted models without a price: ${missing.join(", ")}`);
  const out = new Map<string, ModelPrice>();
  for (const m of allowlist.models) {
    const p = prices.models[m]!;
    out.set(m, {
      prompt: pricePerMillionToPico(p.prompt),
      completion: pricePerMillionToPico(p.completion),
      cacheRead: pricePerMillionToPico(p.cache_read),
    });
  }
  return out;
}
