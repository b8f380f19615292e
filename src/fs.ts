/** Small filesystem facts shared across folders. */
import { access } from "node:fs/promises";

/** true when `p` exists (any kind of entry). */
export async function exists(p: string): Promise<boolean> {
  try {
    await access(p);
    return true;
  } catch {
    return false;
  }
}
