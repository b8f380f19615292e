/**
 * The status page in a real browser during a real evaluation: Debian's Chromium driven by
 * playwright-core, the status server on loopback fed by the evaluation pipeline (real Docker
 * episodes, the real meter, the in-process Engy simulator). One pack is evaluated first so the
 * verdict chart has data; the page is then loaded while a second pack runs on the built-in suite's
 * `quick` set, asserted (a progress row per scenario, live phase changes without reload, the chart,
 * the suite's name where a spec number would be) and photographed to test-output/. Needs `bash scripts/web-deps.sh` (chromium) and the Docker engine.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { type Environment, openEnvironment } from "../../src/environment/index.js";
import { evaluatePack, type PackEvaluation } from "../../src/evaluation/index.js";
import { silentLogger } from "../../src/log.js";
import { loadPack } from "../../src/pack/index.js";
import { LiveStatus } from "../../src/status/index.js";
import { type Db, openDb } from "../../src/store/index.js";
import { type StatusServer, startStatusServer } from "../../src/web/index.js";
import { requireDocker } from "../helpers/docker.js";
import { until } from "../helpers/wait.js";
import { NETWORK } from "../helpers/web.js";

const root = new URL("../..", import.meta.url).pathname;
const CHROMIUM = "/usr/bin/chromium";
const OUT = join(root, "test-output");
const ACTIVE = new Set(["starting", "running", "verifying"]);
/** What the page's progress rows expose (the test compiles without the DOM library). */
type Row = { dataset: Record<string, string | undefined> };

describe("status page in headless Chromium during a running evaluation", () => {
  let dataDir: string;
  let profile: string;
  let db: Db;
  let live: LiveStatus;
  let env: Environment;
  let server: StatusServer;
  let browser: BrowserContext;

  beforeAll(async () => {
    await requireDocker();
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run bash scripts/web-deps.sh`);
    dataDir = mkdtempSync(join(tmpdir(), "web-browser-"));
    profile = mkdtempSync(join(tmpdir(), "web-browser-profile-"));
    const config = loadConfig({
      DATA_DIR: dataDir,
      LLM_API_KEY: "",
      ENGY_SIM_SEED: "11",
      ENGY_SIM_LATENCY_SCALE: "0.02",
      EVAL_CONCURRENCY: "2",
      STATUS_PORT: "0",
      SCENARIOS_DIR: join(root, "scenarios"),
      EPISODE_RUNTIME: process.env.EPISODE_RUNTIME,
    });
    db = openDb(config.dbPath);
    live = new LiveStatus();
    live.registerLoop("eval", 60_000);
    live.tick("eval");
    server = await startStatusServer({ live, network: NETWORK, db, config, log: silentLogger });
    env = await openEnvironment(config, { log: silentLogger, live, db });
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        // Belt and braces: the browser resolves nothing but loopback.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
      ],
      viewport: { width: 1360, height: 1000 },
      deviceScaleFactor: 1,
    });
  }, 600_000);

  afterAll(async () => {
    await browser?.close();
    await env?.close();
    await server?.close();
    db?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it("shows each scenario's live progress and the verdict chart, updating without reload", async () => {
    // A finished verdict first, so the chart has a bar to draw.
    const first = await evaluatePack(env, {
      pack: loadPack(readFileSync(join(root, "examples/packs/pin.json"))),
      label: "examples/packs/pin.json",
      source: "local",
      scenarios: ["binary-flag-hunt", "access-log-regex"],
    });
    expect(first.kind).toBe("verdict");

    const page = await browser.newPage();
    const problems: string[] = [];
    page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") problems.push(`console.${m.type()}: ${m.text()}`);
    });

    // The second evaluation runs in the background while the browser watches.
    let result: PackEvaluation | undefined;
    const running = evaluatePack(env, {
      pack: loadPack(readFileSync(join(root, "examples/packs/advisers.json"))),
      label: "examples/packs/advisers.json",
      source: "local",
      suite: "quick",
    }).then((r) => {
      result = r;
      return r;
    });
    await until(
      () => Object.values(live.evaluation?.scenarios ?? {}).some((s) => ACTIVE.has(s.phase)),
      300_000,
      "an episode of the second evaluation to start",
    );
    expect(result).toBeUndefined();

    await page.goto(server.url, { waitUntil: "domcontentloaded" });
    const rows = page.locator("table#progress tr.scenario");
    expect(await rows.evaluateAll((trs) => trs.map((tr) => (tr as unknown as Row).dataset.scenario))).toEqual(
      ["binary-flag-hunt", "access-log-regex", "git-lost-commit-recovery"],
    );
    const phases = await rows.evaluateAll((trs) => trs.map((tr) => (tr as unknown as Row).dataset.phase));
    expect(phases.some((p) => p === "starting" || p === "running" || p === "verifying")).toBe(true);
    // The evaluation is named by its suite, never by a spec number.
    expect(await page.locator(".eval-meta").textContent()).toMatch(/· suite quick · /);
    // Every row carries its phase badge, elapsed time, spend-vs-cap bar and cap.
    expect(await page.locator("table#progress tr.scenario .phase").count()).toBe(3);
    expect(await page.locator("table#progress tr.scenario svg.bar").count()).toBe(3);
    await expect
      .poll(() => page.locator("table#progress .spend-text").first().textContent())
      .toMatch(/\/ \$0\.3000$/);
    // The chart of recent verdicts: cost segments by model and a score dot for the first pack.
    expect(await page.locator("svg#verdict-chart rect.seg").count()).toBeGreaterThan(0);
    expect(await page.locator("svg#verdict-chart circle.score-dot").count()).toBeGreaterThan(0);
    // The event stream is connected.
    await expect.poll(() => page.locator("#live").getAttribute("class"), { timeout: 10_000 }).toContain("on");

    // Let something visibly progress, then photograph the page mid-run.
    await until(
      () =>
        result !== undefined || Object.values(live.evaluation?.scenarios ?? {}).some((s) => s.spentUsd > 0),
      120_000,
      "spend",
    );
    await page.waitForTimeout(700);
    // The evaluation's header sums its rows as they change (both read in one turn of the page's
    // event loop: a spend update between two reads would make them disagree).
    const { spent, header } = await page.evaluate(() => {
      const doc = (
        globalThis as unknown as {
          document: {
            querySelectorAll(sel: string): Iterable<Row>;
            querySelector(sel: string): { textContent: string | null } | null;
          };
        }
      ).document;
      const trs = [...doc.querySelectorAll("table#progress tr.scenario")];
      return {
        spent: trs.reduce((sum, tr) => sum + Number(tr.dataset.spent ?? 0), 0),
        header: doc.querySelector("#eval-spent")?.textContent ?? null,
      };
    });
    expect(header).toBe(spent === 0 ? "$0" : `$${spent.toFixed(4)}`);
    mkdirSync(OUT, { recursive: true });
    const shot = join(OUT, "web-status-running.png");
    await page.screenshot({ path: shot, fullPage: true });
    expect(result, "the screenshot must be taken while the evaluation runs").toBeUndefined();
    expect(readFileSync(shot).subarray(1, 4).toString()).toBe("PNG");

    // Live updates without a reload: a row reaches a final phase in the page itself.
    // A function, not a string: the page's CSP forbids eval (which string predicates need).
    await page.waitForFunction(
      () => {
        const doc = (globalThis as unknown as { document: { querySelectorAll(sel: string): Iterable<Row> } })
          .document;
        return [...doc.querySelectorAll("tr.scenario")].some((tr) =>
          ["done", "failed"].includes(tr.dataset.phase ?? ""),
        );
      },
      undefined,
      { timeout: 600_000 },
    );
    const verdict = await running;
    expect(verdict.kind).toBe("verdict");
    // When it ends the page goes idle and the new verdict appears, still without a reload.
    await page.waitForSelector("#no-evaluation", { timeout: 20_000 });
    await expect.poll(() => page.locator("table.verdicts tbody tr").count(), { timeout: 20_000 }).toBe(2);
    await page.screenshot({ path: join(OUT, "web-status-idle.png"), fullPage: true });

    // No script error and no CSP violation on the way.
    expect(problems).toEqual([]);
  }, 900_000);
});
