import type { Db } from "./db.js";
import { KvRepo } from "./kv.js";

/** Where a verdict's evidence archive is (src/evidence), found by the evaluation that made the verdict. */
export interface EvidenceListing {
  /** sha256 of the evidence's manifest.json. */
  id: string;
  path: string;
  bytes: number;
  signer: string;
  createdAt: string;
}

/** One evidence per verdict, in the kv table (no schema of its own: a listing, rebuilt with the file). */
export class EvidenceIndex {
  private readonly kv: KvRepo;
  constructor(db: Db) {
    this.kv = new KvRepo(db);
  }

  put(evaluationId: string, e: EvidenceListing): void {
    this.kv.set(`evidence:${evaluationId}`, e);
  }

  get(evaluationId: string): EvidenceListing | undefined {
    return this.kv.get<EvidenceListing>(`evidence:${evaluationId}`);
  }
}
