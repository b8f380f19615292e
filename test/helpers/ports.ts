/** Loopback ports for tests, one home. */
import { createServer } from "node:net";

/**
 * A loopback port that was free a moment ago: bound on 127.0.0.1, then closed, so nothing listens
 * there (a server the test starts next takes it; a client sent there is refused).
 */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}
