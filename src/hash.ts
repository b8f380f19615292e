/** The one content hash the validator names things by: lowercase hex sha256. */
import { createHash } from "node:crypto";

/** Lowercase hex sha256 of bytes, or of a string's UTF-8. */
export function sha256Hex(data: string | Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}
