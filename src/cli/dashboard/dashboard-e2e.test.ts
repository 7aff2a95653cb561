// The dashboard end to end (issue 19's first "Done when"): `arbor run <config> --dashboard 0` on the real stack
// (the shipped SFT policy on two llama.cpp engines, gateway, bwrap sandboxes, GRPO, reference trainer), opened
// in headless Chromium (Debian's `chromium`, driven by playwright-core): programs and engines appear and update,
// one program is drilled into, and a screenshot is saved in the test's temp folder. Then the UI over a simulated
// source of 1,000 programs whose phases change every poll: it stays responsive, counted not timed — the rows in
// the DOM stay bounded (virtualized table) and the redraws stay at most one per event (batched updates).
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { realClock } from "../../core/real-clock.js";
import { bwrapAvailable } from "../../sandbox/bwrap.js";
import type { TrajectoryView } from "../inspect.js";
import { createDashboardServer } from "./dashboard-server.js";
import type { ProgramRow } from "./dashboard-types.js";
import type { DashboardSource, Snapshot } from "./run-source.js";

const CHROMIUM = "/usr/bin/chromium";
const root = join(import.meta.dirname, "../../..");
const missing = !existsSync(CHROMIUM) ? `${CHROMIUM} is missing (scripts/setup.sh --browser installs Debian's chromium)` : !bwrapAvailable().ok ? "bubblewrap sandboxes are unavailable" : undefined;
if (missing) console.warn(`dashboard e2e skipped: ${missing}`);

interface Counters {
  frames: number;
  renders: Record<string, number>;
  events: number;
  rowsInDom: number;
}

// The browser's globals inside page.evaluate callbacks (this file is typed for Node).
declare const window: { __dashboard: Counters };
declare const document: {
  getElementById(id: string): { textContent: string | null; scrollTop: number; scrollHeight: number } | null;
  querySelector(selector: string): { textContent: string | null } | null;
};

let dir: string;
let web: string;
let browser: Browser;

beforeAll(async () => {
  if (missing) return;
  dir = mkdtempSync(join(tmpdir(), "arbor-dashboard-e2e-"));
  chmodSync(dir, 0o755);
  web = join(dir, "web");
  const { buildDashboard } = (await import(pathToFileURL(join(root, "scripts/build-dashboard.mjs")).href)) as { buildDashboard: (out: string) => Promise<void> };
  await buildDashboard(web);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(missing !== undefined)("dashboard in headless Chromium", () => {
  it("arbor run --dashboard: programs and engines appear and update, one program drills down, a screenshot is saved", async () => {
    const config = {
      name: "dashboard-e2e",
      seed: 1,
      model: { path: join(root, "models/calc-sft.gguf") },
      engines: [
        { name: "engine-0", sequences: 4, contextSize: 1024 },
        { name: "engine-1", sequences: 4, contextSize: 1024 },
      ],
      gateway: { host: "127.0.0.1", port: 0, routing: "sticky-program" },
      env: { name: "calc", tasks: 3, seed: 7 },
      rollout: { groupSize: 4, concurrency: 4 },
      agent: { maxTurns: 3, maxTokensPerCall: 32, maxTotalTokens: 96, temperature: 1.0 },
      iterations: 3,
      train: { estimator: "grpo", lr: 0.003, maxGradNorm: 1.0 },
      sandbox: { provider: "bwrap", cpuSeconds: 5, memoryMb: 256, wallMs: 10000, root: join(dir, "sandboxes") },
      reward: { outcome: 1.0, process: 1.0 },
      output: { dir: join(dir, "out") },
    };
    writeFileSync(join(dir, "run.yaml"), JSON.stringify(config));
    const child: ChildProcess = spawn(process.execPath, [join(root, "bin/arbor.mjs"), "run", join(dir, "run.yaml"), "--no-progress", "--dashboard", "0"], { cwd: dir, env: { ...process.env, ARBOR_DASHBOARD_WEB: web }, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
    const url = await new Promise<string>((done, fail) => {
      child.stderr?.on("data", (d: Buffer) => {
        stderr += d.toString();
        const m = /^dashboard (http:\/\/\S+)$/m.exec(stderr);
        if (m?.[1]) done(m[1]);
      });
      void exited.then((code) => fail(new Error(`arbor run exited (${code}) before printing the dashboard's URL:\n${stderr}`)));
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      await page.goto(url);
      // Engines appear, healthy, with their policy version.
      await page.waitForSelector('[data-engine="engine-0"]', { timeout: 60_000 });
      await page.waitForSelector('[data-engine="engine-1"]');
      // Healthy (a probe may time out while the engines load the policy: the next poll says so).
      await page.waitForFunction(() => document.querySelector('[data-engine="engine-0"] td:nth-child(2)')?.textContent === "ok", undefined, { timeout: 60_000 });
      const version0 = await page.textContent('[data-engine="engine-0"] td:nth-child(8)');
      expect(version0).toMatch(/^v\d+$/);
      // Programs appear, and the table updates as the run goes on (the count and the poll move).
      await page.waitForSelector(".program-row", { timeout: 120_000 });
      const total0 = await page.textContent("#program-total");
      const events0 = await page.evaluate(() => window.__dashboard.events);
      await page.waitForFunction((t) => document.getElementById("program-total")?.textContent !== t, total0, { timeout: 180_000 });
      // Renders are batched to the next frame, so events0 may already count the event whose render changes the
      // total (CI failed on "expected 2 to be greater than 2"): wait for a later event rather than compare once.
      await page.waitForFunction((n) => window.__dashboard.events > n, events0, { timeout: 180_000 });
      // Drill into an ended program: its turns with decoded text, its reward.
      const row = await page.waitForSelector('.program-row[data-state="terminated"]', { timeout: 180_000 });
      const id = await row.getAttribute("data-program");
      // The table is redrawn as events arrive, so the row found above may be replaced before the click: a
      // locator finds the program's row again at click time (clicking the handle failed with "not attached").
      await page.locator(`.program-row[data-program="${id}"]`).click({ timeout: 30_000 });
      await page.waitForSelector("#detail .turn", { timeout: 30_000 });
      expect(await page.textContent("#detail-id")).toBe(id);
      expect((await page.textContent("#detail")) ?? "").toMatch(/reward: -?\d/);
      expect((await page.textContent("#detail pre[data-output]"))?.length).toBeGreaterThan(0);
      expect(await page.textContent("#detail")).toMatch(/tokens decoded with/);
      // The sandbox pool panel: the run's programs took sandboxes from the pool (created on demand: poolSize 0).
      await page.waitForFunction(() => Number(document.querySelector('#sandbox-pool td[data-field="created"]')?.textContent) > 0, undefined, { timeout: 60_000 });
      expect(Number(await page.textContent('#sandbox-pool td[data-field="destroyed"]'))).toBeGreaterThanOrEqual(0);
      // The engines update too: after the first trainer step they serve the next policy version.
      await page.waitForFunction((v) => document.querySelector('[data-engine="engine-0"] td:nth-child(8)')?.textContent !== v, version0, { timeout: 180_000 });
      expect(await page.textContent('[data-engine="engine-0"] td:nth-child(8)')).toMatch(/^v[1-9]\d*$/);
      const shot = join(dir, "dashboard.png");
      await page.screenshot({ path: shot, fullPage: true });
      expect(statSync(shot).size).toBeGreaterThan(10_000);
      await page.close();
    } finally {
      if (child.exitCode === null) child.kill("SIGINT");
      await exited;
    }
  }, 600_000);

  it("stays responsive with 1,000 programs: bounded DOM rows, at most one redraw per event", async () => {
    const source = new SimulatedRun(1000);
    const server = createDashboardServer({ source, clock: realClock, pollMs: 60_000, webRoot: web });
    const url = await server.listen("127.0.0.1", 0);
    try {
      const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      await page.goto(`${url}/`);
      await page.waitForFunction(() => document.getElementById("program-total")?.textContent === "(1000)");
      await page.waitForSelector(".program-row");
      const count = (): Promise<Counters> => page.evaluate(() => structuredClone(window.__dashboard));
      const start = await count();
      const polls = 20;
      for (let i = 0; i < polls; i++) await server.pollNow();
      await page.waitForFunction((n) => window.__dashboard.events >= n, start.events + polls);
      // The last poll's phases are on screen: row 0 shows what the source said last.
      await page.waitForFunction((ph) => document.querySelector('.program-row[data-program="sim/p0000"] span:nth-child(3)')?.textContent === ph, source.phaseOf(0));
      // The sandbox pool panel shows the last poll's counters, redrawn with the overview (no more often).
      await page.waitForFunction((n) => document.querySelector('#sandbox-pool td[data-field="created"]')?.textContent === String(n), source.created());
      expect(await page.textContent('#sandbox-pool td[data-field="acquired"]')).toBe(`${source.created() - 3} / 1 / 0 / 2`);
      // Counts per state, then the live phases; the held-out scores as the first curve.
      expect((await page.textContent("#program-counts"))?.trim()).toBe(`active 1000 (${source.phaseOf(0)} 500, ${source.phaseOf(1)} 500)`);
      expect(await page.textContent('[data-curve^="held-out solved"] .label')).toMatch(/^held-out solved \(v0 → v2\): 0\.5/);
      // Its x axis names the first and last version scored, and each point its version and score on hover.
      expect(await page.$$eval('[data-curve^="held-out solved"] .axis', (ts) => ts.map((t) => t.textContent))).toEqual(["v0", "v2"]);
      expect(await page.textContent('[data-curve^="held-out solved"] circle:last-of-type title')).toMatch(/^v2: 0\.5/);
      // A row shows the id without its run's; the whole id on hover.
      expect(await page.textContent('.program-row[data-program="sim/p0000"] span:nth-child(1)')).toBe("p0000");
      expect(await page.getAttribute('.program-row[data-program="sim/p0000"] span:nth-child(1)', "title")).toBe("sim/p0000");
      const end = await count();
      expect(end.rowsInDom).toBeGreaterThan(10);
      expect(end.rowsInDom).toBeLessThanOrEqual(60);
      const events = end.events - start.events;
      expect(events).toBe(polls);
      expect(end.renders.sandboxPool! - start.renders.sandboxPool!).toBeLessThanOrEqual(events);
      expect(end.renders.overview! - start.renders.overview!).toBeLessThanOrEqual(events);
      expect(end.renders.programs! - start.renders.programs!).toBeLessThanOrEqual(events + 1);
      expect(end.frames - start.frames).toBeLessThanOrEqual(2 * events + 1);
      // Scrolled to the end, the last programs are drawn and the DOM still holds a window of rows.
      await page.evaluate(() => {
        const vp = document.getElementById("programs-viewport");
        if (vp) vp.scrollTop = vp.scrollHeight;
      });
      await page.waitForSelector('.program-row[data-program="sim/p0999"]');
      expect(await page.textContent('.program-row[data-program="sim/p0999"] span:nth-child(1)')).toBe("held-out v0 · p0999");
      expect(await page.textContent('.program-row[data-program="sim/p0998"] span:nth-child(1)')).toBe("cut · p0998");
      expect((await count()).rowsInDom).toBeLessThanOrEqual(60);
      await page.close();
    } finally {
      await server.close();
    }
  }, 120_000);
});

/** A run of `n` programs whose phases alternate at every poll; no engines, no store. */
class SimulatedRun implements DashboardSource {
  readonly mode = "live" as const;
  private polls = 0;
  constructor(private readonly n: number) {}

  /** Sandboxes the simulated pool has created by the latest poll. */
  created(): number {
    return 10 + this.polls;
  }

  phaseOf(i: number): "reasoning" | "acting" {
    return (i + this.polls) % 2 === 0 ? "reasoning" : "acting";
  }

  async poll(): Promise<Snapshot> {
    this.polls++;
    const programs: ProgramRow[] = Array.from({ length: this.n }, (_, i) => ({
      id: `sim/p${String(i).padStart(4, "0")}`,
      runId: "sim",
      groupId: `g${Math.floor(i / 8)}`,
      iteration: null,
      // The last program is a held-out evaluation's.
      heldOutVersion: i === this.n - 1 ? 0 : null,
      // The one before it is of an iteration a kill cut (rolled out again on resume).
      superseded: i === this.n - 2,
      taskId: `t${Math.floor(i / 8)}`,
      state: "active",
      termination: null,
      terminationDetail: null,
      reward: null,
      components: null,
      calls: this.polls,
      toolCalls: 0,
      promptTokens: 10 * this.polls,
      outputTokens: 5 * this.polls,
      phase: this.phaseOf(i),
      inFlight: this.phaseOf(i) === "reasoning" ? 1 : 0,
      contextTokens: 15 * this.polls,
      backend: "sim-engine",
      lastActivity: 0,
    }));
    const created = this.created();
    const sandboxPool = { warm: 4, idle: 2, inUse: created - 8, queued: 0, created, destroyed: 4, acquired: { hit: created - 3, in_flight: 1, miss: 2 }, leaks: 0 };
    return { runs: [], programs, engines: [], gateway: null, sandboxPool, curves: [], heldOut: [{ version: 0, solved: 0.25, solvedSe: 0.05 }, { version: 2, solved: 0.5, solvedSe: null }], highlights: [], errors: [] };
  }

  async program(): Promise<TrajectoryView | undefined> {
    return undefined;
  }
}
