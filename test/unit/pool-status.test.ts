/**
 * What operators see of the engine pool: the status page's Engines card, `status`'s ENGINES table
 * and /metrics per engine, from one snapshot (the pool's views through LiveStatus).
 */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { type EngineView, LiveStatus } from "../../src/status/index.js";
import { openDb } from "../../src/store/index.js";
import { renderMain } from "../../src/web/html.js";
import { ValidatorMetrics } from "../../src/web/metrics.js";
import { StatusReader } from "../../src/web/snapshot.js";
import { renderText } from "../../src/web/text.js";
import { NETWORK } from "../helpers/web.js";

const NOW = Date.parse("2026-06-01T12:00:00Z");

const view = (over: Partial<EngineView>): EngineView => ({
  name: "local",
  url: "unix:///var/run/docker.sock",
  primary: true,
  state: "ready",
  draining: false,
  slots: 3,
  running: 2,
  episodes: { scored: 7, failed: 1 },
  failures: {},
  images: { present: 11, wanted: 11, copies: 0, copiedBytes: 0, pulls: 0 },
  version: "20.10.24",
  runtime: { name: "runsc", gvisor: true },
  lastError: null,
  since: NOW - 60_000,
  ...over,
});

function snapshot(engines: EngineView[]) {
  const live = new LiveStatus(() => NOW);
  live.setEngines(engines);
  return new StatusReader(openDb(":memory:"), NETWORK).snapshot({ config: loadConfig({}), live, now: NOW });
}

const pool = [
  view({}),
  view({
    name: "b",
    url: "tcp://10.0.0.12:2376",
    primary: false,
    state: "down",
    draining: true,
    slots: 4,
    running: 0,
    episodes: { scored: 3, failed: 2 },
    failures: { engine_lost: 1, image_copy_failed: 2 },
    images: { present: 11, wanted: 11, copies: 11, copiedBytes: 549_000_000, pulls: 0 },
    runtime: { name: "runc", gvisor: false },
    lastError: { code: "engine_lost", message: "no answer to a ping for 26 s", at: NOW - 5_000 },
    since: NOW - 5_000,
  }),
];

describe("the pool on the status page, in status and /metrics", () => {
  it("the Engines card: one row per engine with state, slots in use, outcomes, failures, images, last error", () => {
    const html = renderMain(snapshot(pool));
    expect(html).toContain('id="engines"');
    const row = html.slice(
      html.indexOf('data-engine="b"'),
      html.indexOf("</tr>", html.indexOf('data-engine="b"')),
    );
    expect(row).toContain("tcp://10.0.0.12:2376");
    expect(row).toContain("down · draining");
    expect(row).toContain("0 / 4");
    expect(row).toContain("3 / 2");
    expect(row).toContain("engine_lost 1, image_copy_failed 2");
    expect(row).toContain("copied 11 (549 MB)");
    expect(row).toContain("<td>runc</td>");
    expect(row).toContain('title="no answer to a ping for 26 s"');
    expect(html).toContain('data-engine="local"');
  });

  it("the default single engine, healthy, adds nothing to the page", () => {
    const html = renderMain(snapshot([view({ slots: null })]));
    expect(html).not.toContain('id="engines"');
    expect(renderText(snapshot([view({ slots: null })]))).not.toContain("ENGINES");
  });

  it("status prints the same table", () => {
    const text = renderText(snapshot(pool));
    const lines = text.split("\n");
    const at = lines.indexOf("ENGINES");
    expect(at).toBeGreaterThan(0);
    expect(lines[at + 1]).toMatch(/engine\s+url\s+state\s+running/);
    expect(lines[at + 3]).toMatch(
      /^ {2}b\s+tcp:\/\/10\.0\.0\.12:2376\s+down · draining \(5\.0s ago\)\s+0\/4\s+3\/2\s+engine_lost 1/,
    );
  });

  it("/metrics per engine", async () => {
    const m = new ValidatorMetrics({ defaultMetrics: false });
    const text = await m.render(snapshot(pool));
    for (const line of [
      'trajrl_engine_up{engine="local"} 1',
      'trajrl_engine_up{engine="b"} 0',
      'trajrl_engine_draining{engine="b"} 1',
      'trajrl_engine_slots{engine="b"} 4',
      'trajrl_engine_running_episodes{engine="local"} 2',
      'trajrl_engine_episodes_total{engine="b",outcome="failed"} 2',
      'trajrl_engine_failures_total{engine="b",code="engine_lost"} 1',
      'trajrl_engine_images{engine="b"} 11',
      'trajrl_engine_image_copies_total{engine="b"} 11',
      'trajrl_engine_image_copied_bytes_total{engine="b"} 549000000',
    ])
      expect(text).toContain(line);
  });
});
