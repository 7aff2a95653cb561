// Several engines share a draft group's tree over HTTP (issue 17, item 3): engine A serves its group trees
// at /v1/specdec, engine B (`speculative.draftService: {url: A}`) sends its grouped requests' tokens there
// and drafts from local copies synced once per step. A sibling that ran on A drafts B's request; outputs
// stay the non-speculative ones; a service that cannot be reached costs drafts, never a request.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensurePolicy } from "../../model/policy.js";
import { startEngineServer, type EngineServer, type EngineServerOptions } from "../server.js";
import type { SpeculativeOptions } from "../specdec/speculative-options.js";
import type { LlamaCppStepRunner } from "./llamacpp-step-runner.js";
import type { ScheduledExecutor } from "./scheduled-executor.js";

const INIT = { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 };
const PROMPT = "The quick brown fox jumps over the lazy dog, twice.";
/** No global tree of past responses: drafts come from the request's own tree and its group's only. */
const SPEC: SpeculativeOptions = { method: "suffix", maxSpecTokens: 6, maxCachedResponses: 0, adaptive: false };

let dir: string;
let common: Omit<EngineServerOptions, "name">;
const servers: EngineServer[] = [];

interface Answer {
  ids: number[];
  logprobs: number[];
  finish: string;
}

async function complete(server: EngineServer, group?: string): Promise<Answer> {
  const res = await server.app.inject({
    method: "POST",
    url: "/v1/completions",
    payload: { prompt: PROMPT, max_tokens: 30, temperature: 0, logprobs: 1, return_token_ids: true, ...(group ? { draft_group_id: group } : {}) },
  });
  expect(res.statusCode, res.body).toBe(200);
  const c = (res.json() as { choices: { token_ids: number[]; finish_reason: string; logprobs: { token_logprobs: number[] } }[] }).choices[0]!;
  return { ids: c.token_ids, logprobs: c.logprobs.token_logprobs, finish: c.finish_reason };
}

function expectSame(got: Answer, want: Answer): void {
  expect(got.ids).toEqual(want.ids);
  expect(got.finish).toBe(want.finish);
  got.logprobs.forEach((lp, i) => expect(Math.abs(lp - want.logprobs[i]!)).toBeLessThan(1e-5));
}

async function engine(name: string, speculative?: SpeculativeOptions): Promise<EngineServer> {
  const s = await startEngineServer({ ...common, name, ...(speculative ? { speculative } : {}) } as EngineServerOptions);
  servers.push(s);
  return s;
}

const runnerOf = (s: EngineServer) => (s.executor as ScheduledExecutor).runner as LlamaCppStepRunner;
const accepted = (s: EngineServer) => runnerOf(s).stats().numAcceptedTokens;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "arbor-shared-drafts-"));
  const modelPath = ensurePolicy(dir, INIT).path;
  common = { modelPath, policyVersion: 1, sequences: 2, contextSize: 256, maxWaiting: 4, seed: 3, executorKind: "llamacpp-scheduled" };
});

afterAll(async () => {
  for (const s of servers) await s.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("a draft group shared by two engines over HTTP", () => {
  it("a sibling that ran on engine A drafts engine B's request; outputs equal the non-speculative ones", async () => {
    const plain = await engine("plain");
    const a = await engine("a", SPEC);
    // A generous time limit: on a loaded machine a call past the default 2 s would (rightly) fall back to
    // local drafts, which this test is not about.
    const b = await engine("b", { ...SPEC, draftService: { url: (a as { url: string }).url, timeoutMs: 60_000 } });
    const want = await complete(plain);
    expect(want.ids.length).toBeGreaterThan(10);

    // The first sibling of group g runs on A (A's own trees, which A serves to B). Each is its engine's
    // first request: the engines' request ids are the same, their sequences in the group must not be.
    expectSame(await complete(a, "g"), want);
    // The second runs on B: its drafts come from A's sibling (greedy siblings give the same response).
    expectSame(await complete(b, "g"), want);
    const fromSibling = accepted(b);
    expect(runnerOf(b).stats()).toMatchObject({ draftServiceFailures: 0, draftServiceLocalSteps: 0 });
    // B alone: a group of its own (no sibling anywhere) drafts from the request's own tokens only.
    expectSame(await complete(b, "alone"), want);
    const alone = accepted(b) - fromSibling;
    expect(fromSibling).toBeGreaterThan(alone);
    expect(fromSibling).toBeGreaterThan(want.ids.length / 2);
    expect(runnerOf(b).stats()).toMatchObject({ draftServiceFailures: 0, draftServiceLocalSteps: 0 });
    expect(runnerOf(b).stats().draftServiceSyncedSteps).toBeGreaterThan(0);

    // A's service holds both siblings' outputs: B sent its tokens there, as A's next sibling will draft from.
    const res = await fetch(`${(a as { url: string }).url}/v1/specdec/fetch`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ group_ids: ["g"], since: 0 }) });
    const held = (await res.json()) as { groups: { sequences: { tokens: number[] }[] }[] };
    expect(held.groups[0]!.sequences.map((s) => s.tokens)).toEqual([want.ids, want.ids]);

    // The service goes away: B's next sibling drafts from B's own trees (its earlier sibling of g ran on
    // B too), the failure is counted, the request is answered as before.
    expect((await a.app.inject({ method: "GET", url: "/metrics" })).body).not.toMatch(/draft_service/);
    await a.close();
    expectSame(await complete(b, "g"), want);
    const s = runnerOf(b).stats();
    expect(s.draftServiceFailures).toBeGreaterThan(0);
    expect(s.draftServiceLocalSteps).toBeGreaterThan(0);
    const text = (await b.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(text).toMatch(new RegExp(`^arbor_spec_decode_draft_service_failures_total\\{[^}]*\\} ${s.draftServiceFailures}$`, "m"));
    expect(text).toMatch(new RegExp(`^arbor_spec_decode_draft_service_local_steps_total\\{[^}]*\\} ${s.draftServiceLocalSteps}$`, "m"));
  });

  it("a service unreachable from the start: every request is answered, drafted from the engine's own group trees", async () => {
    const plain = await engine("plain2");
    // Port 1 on loopback refuses connections at once.
    const e = await engine("c", { ...SPEC, draftService: { url: "http://127.0.0.1:1", timeoutMs: 1000 } });
    const want = await complete(plain);
    expectSame(await complete(e, "g2"), want);
    const first = accepted(e);
    expectSame(await complete(e, "g2"), want);
    // The local group tree still drafts the second sibling from the first.
    expect(accepted(e) - first).toBeGreaterThan(want.ids.length / 2);
    const s = runnerOf(e).stats();
    expect(s.draftServiceSyncedSteps).toBe(0);
    expect(s.draftServiceFailures).toBeGreaterThan(0);
    expect(s.draftServiceLocalSteps).toBeGreaterThan(s.draftServiceFailures);
  });
});
