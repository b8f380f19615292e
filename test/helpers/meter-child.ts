/**
 * A meter alone in a process of its own, for tests that watch its memory: configured from argv
 * (the upstream URL, then a JSON object of MeterOptions overrides), it listens on loopback, mints
 * two episode tokens and prints "PORT TOKEN_A TOKEN_B" on stdout; it stops on SIGTERM.
 *   node --import tsx test/helpers/meter-child.ts http://127.0.0.1:PORT/v1 '{"maxBufferedBytes": 67108864}'
 */
import { loadAllowlist, loadPriceTable, Meter, type MeterOptions } from "../../src/meter/index.js";

const [upstreamUrl, extra] = process.argv.slice(2);
const meter = new Meter({
  upstreamUrl: upstreamUrl!,
  apiKey: "sk-op",
  allowlist: loadAllowlist(),
  prices: loadPriceTable(),
  ...(JSON.parse(extra ?? "{}") as Partial<MeterOptions>),
});
const l = await meter.listen("127.0.0.1", 0);
console.log(`${l.port} ${meter.mint("flood", 1000)} ${meter.mint("neighbour", 1000)}`);
process.on("SIGTERM", () => {
  void meter.stop().then(() => process.exit(0));
});
