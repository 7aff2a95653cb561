// The dashboard's web UI: plain TypeScript and the DOM, bundled by Vite (no CDN). It reads the JSON API and
// follows the SSE stream of docs/dashboard.md. Updates are batched: SSE events only mark what changed, and one
// render per animation frame redraws it. The programs table is virtualized: only the rows in view (plus a small
// overscan) are fetched (GET /api/programs?offset&limit) and put in the DOM, so 1,000 or 100,000 programs cost the
// same. `window.__dashboard` counts renders and rows for the end-to-end test (src/cli/dashboard/dashboard-e2e.test.ts).
import type { CurvePoint, EngineRow, GatewayRow, HeldOutPoint, Highlight, Overview, ProgramRow, ProgramsPage, SandboxPoolRow } from "../../src/cli/dashboard/dashboard-types.js";
import type { TrajectoryView } from "../../src/cli/inspect.js";

const ROW_HEIGHT = 22;
const OVERSCAN = 10;

interface Counters {
  /** Render passes (one per animation frame with something to draw). */
  frames: number;
  /** Redraws of each part. */
  renders: Record<"overview" | "engines" | "sandboxPool" | "highlights" | "curves" | "programs" | "detail", number>;
  /** Overview events received. */
  events: number;
  /** Program rows in the DOM now. */
  rowsInDom: number;
}

const counters: Counters = { frames: 0, renders: { overview: 0, engines: 0, sandboxPool: 0, highlights: 0, curves: 0, programs: 0, detail: 0 }, events: 0, rowsInDom: 0 };
(window as unknown as { __dashboard: Counters }).__dashboard = counters;

const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;
const fmt = (x: number | null | undefined, digits = 3): string => (x === null || x === undefined ? "-" : Number.isInteger(x) ? String(x) : x.toFixed(digits));
const pct = (x: number | null): string => (x === null ? "-" : `${(100 * x).toFixed(1)}%`);

function el<K extends keyof HTMLElementTagNameMap>(tag: K, text?: string, cls?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

let overview: Overview | undefined;
let page: ProgramsPage | undefined;
let selected: string | undefined;
let detail: (TrajectoryView & { live: ProgramRow | null }) | { error: string } | undefined;
const dirty = new Set<"overview" | "programs" | "detail">();
let frameQueued = false;

/** Mark parts to redraw; one animation frame draws everything marked since the last. */
function invalidate(...parts: ("overview" | "programs" | "detail")[]): void {
  for (const p of parts) dirty.add(p);
  if (frameQueued) return;
  frameQueued = true;
  requestAnimationFrame(() => {
    frameQueued = false;
    counters.frames++;
    if (dirty.has("overview")) renderOverview();
    if (dirty.has("programs")) renderPrograms();
    if (dirty.has("detail")) renderDetail();
    dirty.clear();
  });
}

// ---- data ----

let pageSeq = 0;
let pageInFlight = false;
let pageAgain = false;

/** Fetch the rows in view; at most one request in flight, the latest wish served after it. */
async function loadPage(): Promise<void> {
  if (pageInFlight) {
    pageAgain = true;
    return;
  }
  pageInFlight = true;
  try {
    const vp = $("programs-viewport");
    const first = Math.max(0, Math.floor(vp.scrollTop / ROW_HEIGHT) - OVERSCAN);
    const count = Math.ceil(vp.clientHeight / ROW_HEIGHT) + 2 * OVERSCAN;
    const q = new URLSearchParams({ offset: String(first), limit: String(Math.min(count, 500)) });
    const state = ($("filter-state") as HTMLSelectElement).value;
    const phase = ($("filter-phase") as HTMLSelectElement).value;
    if (state) q.set("state", state);
    if (phase) q.set("phase", phase);
    const seq = ++pageSeq;
    const res = await fetch(`/api/programs?${q}`);
    if (res.ok && seq === pageSeq) {
      page = (await res.json()) as ProgramsPage;
      invalidate("programs");
    }
  } finally {
    pageInFlight = false;
    if (pageAgain) {
      pageAgain = false;
      void loadPage();
    }
  }
}

async function loadDetail(id: string): Promise<void> {
  const res = await fetch(`/api/programs/${encodeURIComponent(id)}`);
  if (id !== selected) return;
  detail = res.ok ? ((await res.json()) as typeof detail) : { error: ((await res.json()) as { error: string }).error };
  invalidate("detail");
}

function connect(): void {
  const es = new EventSource("/api/events");
  es.addEventListener("overview", (e) => {
    counters.events++;
    overview = JSON.parse((e as MessageEvent<string>).data) as Overview;
    invalidate("overview");
    void loadPage();
    // A live program's drill-down follows its new calls.
    if (selected !== undefined && detail && "program" in detail && detail.program.state === "active") void loadDetail(selected);
  });
  es.addEventListener("dropped", () => void loadPage());
  es.onopen = () => ($("status").textContent = "live");
  es.onerror = () => ($("status").textContent = "reconnecting…");
}

// ---- rendering ----

function renderOverview(): void {
  const o = overview;
  if (!o) return;
  counters.renders.overview++;
  $("mode").textContent = `${o.mode === "live" ? "live run" : "stored run"} · ${o.runs.map((r) => r.id).join(", ") || "no runs yet"}`;
  $("status").textContent = `${o.mode === "live" ? "live" : "read-only"} · poll ${o.seq} · ${new Date(o.time).toLocaleTimeString()}${o.errors.length ? ` · ${o.errors.join("; ")}` : ""}`;
  $("program-total").textContent = `(${o.programsTotal})`;
  const counts = $("program-counts");
  counts.replaceChildren(
    ...Object.entries(o.programCounts).map(([state, byPhase]) => {
      // Per state its count, then its live phases (phase `none`: not held by the gateway, every stored program).
      const total = Object.values(byPhase).reduce((a, b) => a + b, 0);
      const phases = Object.entries(byPhase).filter(([ph]) => ph !== "none").map(([ph, n]) => `${ph} ${n}`);
      const span = el("span", `${state} ${total}${phases.length > 0 ? ` (${phases.join(", ")})` : ""}  `);
      span.dataset.state = state;
      return span;
    }),
  );
  renderEngines(o.engines, o.gateway);
  renderSandboxPool(o.sandboxPool);
  renderHighlights(o.highlights);
  renderCurves(o.curves, o.heldOut);
}

function renderEngines(engines: EngineRow[], gateway: GatewayRow | null): void {
  counters.renders.engines++;
  $("engines").replaceChildren(
    ...engines.map((e) => {
      const tr = el("tr");
      tr.dataset.engine = e.name;
      tr.append(
        el("td", e.name),
        el("td", e.healthy ? "ok" : (e.error ?? "unhealthy"), e.healthy ? "ok" : "bad"),
        el("td", fmt(e.running)),
        el("td", fmt(e.waiting)),
        el("td", pct(e.kvUsage)),
        el("td", e.prefixHitRate === null ? "-" : `${pct(e.prefixHitRate)} of ${fmt(e.prefixCacheQueries)}`),
        el("td", fmt(e.preemptions)),
        el("td", e.policyVersion === null ? "-" : `v${e.policyVersion}`),
      );
      return tr;
    }),
  );
  $("gateway").textContent = gateway
    ? `gateway ${gateway.healthy ? "ok" : gateway.error}: ${fmt(gateway.activePrograms)} active programs, ${fmt(gateway.inflightRequests)} calls in flight, ${fmt(gateway.pauses)} pauses, ${fmt(gateway.restores)} restores, ${fmt(gateway.heldCalls)} held calls`
    : engines.length === 0
      ? "no live engines (a stored run)"
      : "";
}

/** The sandbox pool's counters (the gateway's arbor_sandbox_pool_* metrics), one row; a note when there is none. */
function renderSandboxPool(pool: SandboxPoolRow | null): void {
  counters.renders.sandboxPool++;
  const tr = $("sandbox-pool");
  if (!pool) {
    tr.replaceChildren();
    $("sandbox-pool-note").textContent = "no sandbox pool to show (a stored run, or a gateway without one)";
    return;
  }
  const a = pool.acquired;
  const cell = (field: string, text: string): HTMLElement => {
    const td = el("td", text);
    td.dataset.field = field;
    return td;
  };
  tr.replaceChildren(
    cell("warm", fmt(pool.warm)),
    cell("idle", fmt(pool.idle)),
    cell("inUse", fmt(pool.inUse)),
    cell("queued", fmt(pool.queued)),
    cell("created", fmt(pool.created)),
    cell("destroyed", fmt(pool.destroyed)),
    cell("acquired", ["hit", "in_flight", "warm", "miss"].map((k) => fmt(a[k] ?? 0)).join(" / ")),
    cell("leaks", fmt(pool.leaks)),
  );
  $("sandbox-pool-note").textContent = pool.leaks ? `${pool.leaks} leaked sandbox(es) found and reclaimed` : "";
}

function renderHighlights(hs: Highlight[]): void {
  counters.renders.highlights++;
  const ul = $("highlights");
  if (hs.length === 0) {
    ul.replaceChildren(el("li", "nothing to look at", "ok"));
    return;
  }
  ul.replaceChildren(
    ...hs.slice(0, 200).map((h) => {
      const li = el("li");
      li.dataset.kind = h.kind;
      li.append(el("span", h.kind, "kind bad"), el("span", `${h.subject}: ${h.reason}`));
      return li;
    }),
  );
}

/**
 * One SVG line chart of the values, one point each in order (null values skipped). `names[i]` says what point i is
 * (`iteration 3`, `v2`): the first and last name label the x axis, and each point tells its name and value on hover.
 */
function chart(values: readonly (number | null)[], label: string, names: readonly string[]): HTMLElement {
  const w = 260;
  const h = 110;
  const pad = 24;
  const xs = values.map((y, i) => [i, y] as const).filter((x): x is readonly [number, number] => x[1] !== null && Number.isFinite(x[1]));
  const box = el("div", undefined, "curve");
  box.dataset.curve = label;
  const ys = xs.map(([, y]) => y);
  const lo = Math.min(...ys);
  const hi = Math.max(...ys);
  const n = Math.max(1, values.length - 1);
  const sx = (i: number): number => pad + ((w - 2 * pad) * i) / n;
  const sy = (y: number): number => (hi === lo ? h / 2 : h - pad - ((h - 2 * pad) * (y - lo)) / (hi - lo));
  const path = xs.map(([i, y], k) => `${k === 0 ? "M" : "L"}${sx(i).toFixed(1)},${sy(y).toFixed(1)}`).join(" ");
  const last = ys[ys.length - 1];
  const points = xs.map(([i, y]) => `<circle cx="${sx(i).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="3" fill="#3b6fd8"><title>${names[i] ?? i}: ${fmt(y)}</title></circle>`).join("");
  const axis =
    xs.length === 0
      ? ""
      : `<text class="axis" x="${sx(xs[0]![0]).toFixed(1)}" y="${h - 6}" text-anchor="start">${names[xs[0]![0]] ?? ""}</text>` +
        (xs.length > 1 ? `<text class="axis" x="${sx(xs.at(-1)![0]).toFixed(1)}" y="${h - 6}" text-anchor="end">${names[xs.at(-1)![0]] ?? ""}</text>` : "");
  box.innerHTML = `<div class="label">${label}: ${xs.length ? `${fmt(last)} (min ${fmt(lo)}, max ${fmt(hi)})` : "no data yet"}</div><svg width="${w}" height="${h}" viewBox="0 0 ${w} ${h}"><path d="${path}" fill="none" stroke="#3b6fd8" stroke-width="2"/>${points}${axis}</svg>`;
  return box;
}

function renderCurves(points: CurvePoint[], heldOut: HeldOutPoint[]): void {
  counters.renders.curves++;
  const of = (pick: (p: CurvePoint) => number | null): (number | null)[] => points.map(pick);
  const names = points.map((p) => `${p.kind} ${p.index}`);
  const charts = [chart(of((p) => p.meanReward), "mean reward", names), chart(of((p) => p.meanOutputTokens), "output tokens / program", names), chart(of((p) => p.loss), "loss", names), chart(of((p) => p.entropy), "entropy", names)];
  // The score that says whether the policy learns its task (tasks never trained on): first where a run has it.
  if (heldOut.length > 0) charts.unshift(chart(heldOut.map((p) => p.solved), `held-out solved (v${heldOut[0]!.version} → v${heldOut.at(-1)!.version})`, heldOut.map((p) => `v${p.version}`)));
  $("curves").replaceChildren(...charts);
}

function renderPrograms(): void {
  const p = page;
  if (!p) return;
  counters.renders.programs++;
  const spacer = $("programs-spacer");
  spacer.style.height = `${p.total * ROW_HEIGHT}px`;
  const rows = $("programs-rows");
  rows.style.top = `${p.offset * ROW_HEIGHT}px`;
  rows.replaceChildren(
    ...p.rows.map((r) => {
      const div = el("div", undefined, `program-row${r.id === selected ? " selected" : ""}`);
      div.dataset.program = r.id;
      div.dataset.state = r.state;
      // Held-out evaluation programs share the run's id and never train: marked so they read apart.
      if (r.heldOutVersion !== null) div.dataset.heldOut = String(r.heldOutVersion);
      // The id without its run's (every program's id starts with it): the narrow column then shows the part that
      // tells programs apart (iteration or evaluation, group, sample), the whole id on hover and in the detail.
      const own = r.runId !== "" && r.id.startsWith(`${r.runId}/`) ? r.id.slice(r.runId.length + 1) : r.id;
      // A program of an iteration or evaluation a kill cut (rolled out again on resume) counts nowhere: said first.
      const label = r.heldOutVersion !== null ? `held-out v${r.heldOutVersion} · ${own}` : own;
      const idCell = el("span", r.superseded ? `cut · ${label}` : label);
      idCell.title = r.id;
      div.append(
        idCell,
        el("span", r.state),
        el("span", r.phase ?? "-"),
        el("span", String(r.calls)),
        el("span", `${r.promptTokens}+${r.outputTokens}`),
        el("span", fmt(r.reward)),
        el("span", r.termination ?? "-"),
      );
      div.onclick = () => select(r.id);
      return div;
    }),
  );
  counters.rowsInDom = rows.childElementCount;
}

function renderDetail(): void {
  counters.renders.detail++;
  const box = $("detail");
  $("detail-id").textContent = selected ?? "(click a program)";
  if (!detail) {
    box.replaceChildren(el("p", "loading…"));
    return;
  }
  if ("error" in detail) {
    box.replaceChildren(el("p", detail.error, "bad"));
    return;
  }
  const v = detail;
  const p = v.program;
  const heldOut = v.live?.heldOutVersion ?? null;
  const parts: HTMLElement[] = [
    el("p", `run ${p.runId} · group ${p.groupId}${heldOut !== null ? ` (held-out evaluation of v${heldOut}, never trained on)` : ""} · task ${p.taskId} · state ${p.state}${v.live?.phase ? ` (${v.live.phase})` : ""}`),
    el("p", `termination: ${p.termination ? `${p.termination.kind}${p.termination.detail ? ` (${p.termination.detail})` : ""}` : "-"}`),
    el("p", `reward: ${v.reward ? `${fmt(v.reward.total)}  ${Object.entries(v.reward.components).map(([k, x]) => `${k}=${fmt(x)}`).join(" ")}` : "-"}`),
    el("p", "source" in v.tokenizer ? `tokens decoded with ${v.tokenizer.source}` : `token ids shown: ${v.tokenizer.unavailable}`),
  ];
  for (const t of v.turns) {
    const turn = el("div", undefined, "turn");
    turn.dataset.turn = String(t.callIndex);
    for (const e of t.contextEvents ?? []) turn.append(el("p", `context ${e.policy}: ${e.action}, ${e.tokensBefore} → ${e.tokensAfter} tokens${e.detail ? ` (${e.detail})` : ""}`));
    turn.append(el("p", `call ${t.callIndex} · ${t.backend} · policy v${t.policyVersion} · finish ${t.finishReason} · ${t.promptTokens} prompt + ${t.outputIds.length} output tokens`));
    if (t.contextReset !== null) turn.append(el("p", `context reset: ${t.contextReset}`, "bad"));
    turn.append(el("div", t.newPromptFrom > 0 ? `prompt (new after token ${t.newPromptFrom}):` : "prompt:"), el("pre", t.newPromptText ?? `ids ${JSON.stringify(t.newPromptIds)}`));
    const out = el("pre", t.outputText ?? `ids ${JSON.stringify(t.outputIds)}`);
    out.dataset.output = "";
    turn.append(el("div", "output:"), out);
    for (const x of t.tools ?? []) turn.append(el("div", `tool ${x.tool} (${x.ok ? "ok" : "failed"}, ${x.durationMs} ms)`), el("pre", `input: ${x.input}\noutput: ${x.output}`));
    parts.push(turn);
  }
  box.replaceChildren(...parts);
}

function select(id: string): void {
  selected = id;
  detail = undefined;
  invalidate("detail", "programs");
  void loadDetail(id);
}

$("programs-viewport").addEventListener("scroll", () => void loadPage(), { passive: true });
for (const id of ["filter-state", "filter-phase"]) {
  $(id).addEventListener("change", () => {
    $("programs-viewport").scrollTop = 0;
    void loadPage();
  });
}
connect();
