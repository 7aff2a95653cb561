// `exportStore` on a small real store (testing/inspect-store.ts), in every format, read back with readers that
// share no code with the writers: Parquet with hyparquet (pure JS), Arrow with apache-arrow, safetensors with
// the safetensors reader, JSONL parsed. Every row must equal the call the store recorded, and the batch files
// must carry the batch builder's samples.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tableFromIPC } from "apache-arrow";
import { parquetMetadata, parquetReadObjects } from "hyparquet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isIntTensor, readSafetensors } from "../model/safetensors.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { writeInspectStore, type InspectStore } from "../testing/inspect-store.js";
import { fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import { readArrowBatch } from "./export-arrow.js";
import { readSamplesJsonl } from "./export-jsonl.js";
import { readTreeSafetensors } from "./export-safetensors.js";
import { checkExportFormat, exportStore, runBatch, type StoreExport } from "./export-store.js";
import { heldOutRunConfigJson } from "../core/held-out-run.js";
import type { ExportFormat } from "./export-trajectories.js";
import type { ScoredSample } from "./batch-sample.js";

let dir: string;
let fixture: InspectStore;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-export-"));
  fixture = await writeInspectStore(join(dir, "store.sqlite"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Store a group with one completed one-call program per sample, rewarded by its index. */
async function storeCompletedGroup(store: SqliteTrajectoryStore, g: ReturnType<typeof fixtureGroup>): Promise<void> {
  await store.createGroup(g);
  for (const [i, id] of g.programIds.entries()) {
    await store.createProgram(fixtureProgram(g, i));
    await store.recordCall(fixtureCall(id, 0, [-0.5, -1]));
    await store.endProgram(id, { kind: "completed" }, 10);
    await store.setReward(id, { total: i, components: { outcome: i } });
  }
}

async function exportAs(format: ExportFormat): Promise<StoreExport> {
  const store = new SqliteTrajectoryStore(fixture.path);
  try {
    return await exportStore(store, { format, out: join(dir, format) });
  } finally {
    await store.close();
  }
}

/** A row as plain JSON values (typed arrays and bigints made plain), whatever reader produced it. */
function plain(v: unknown): unknown {
  if (typeof v === "bigint") return Number(v);
  if (ArrayBuffer.isView(v)) return Array.from(v as unknown as ArrayLike<number>);
  if (Array.isArray(v)) return v.map(plain);
  // Arrow vectors and struct rows.
  if (v !== null && typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON === "function") return plain((v as { toJSON(): unknown }).toJSON());
  if (v !== null && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

const TERMINATIONS: Record<string, string> = { "g1-p0": "completed", "g1-p1": "completed", "g2-p0": "max_turns", "g3-p0": "aborted" };

/** Check every row against the store's calls as the fixture wrote them; `f32` when logprobs went through float32. */
function expectRowsEqualStore(rows: Record<string, unknown>[], opts: { f32?: boolean } = {}): void {
  expect(rows.map((r) => r.call_id)).toEqual(fixture.calls.map((c) => c.id));
  for (const [i, row] of rows.entries()) {
    const c = fixture.calls[i]!;
    const programId = c.programId;
    expect(row.program_id).toBe(programId);
    expect(row.run_id).toBe(programId.startsWith("g3") ? "run-2" : "run-1");
    expect(row.group_id).toBe(programId.split("-")[0]);
    expect(row.call_index).toBe(c.index);
    expect(row.prompt_ids, c.id).toEqual(c.promptTokenIds);
    expect(row.output_ids, c.id).toEqual(c.outputTokenIds);
    expect(row.logprobs, c.id).toEqual(opts.f32 ? c.logprobs.map(Math.fround) : c.logprobs);
    expect(row.policy_versions, c.id).toEqual(c.tokenPolicyVersions ?? c.outputTokenIds.map(() => c.policyVersion));
    expect(row.response).toBe(c.outputText);
    if ("prompt" in row) expect(row.prompt).toEqual(c.messages.map((m) => ({ role: m.role, content: m.content })));
    expect(row.finish_reason).toBe(c.finishReason);
    expect(row.context_reset).toBe(c.contextReset === true);
    expect(row.context_reset_reason).toBe(c.contextResetReason ?? null);
    expect(row.served_model).toBe("arbor-tiny");
    expect(row.requested_model).toBe(c.requestedModel ?? null);
    expect([row.max_tokens_asked, row.max_tokens_granted]).toEqual(c.maxTokensClamped ? [c.maxTokensClamped.asked, c.maxTokensClamped.granted] : [null, null]);
    expect(row.reward).toBe(fixture.rewards[programId] ?? null);
    expect(row.reward_components).toBe(programId in fixture.rewards ? JSON.stringify({ outcome: fixture.rewards[programId], format: 1 }) : null);
    expect(row.termination).toBe(TERMINATIONS[programId]);
    // hyparquet reads a null scalar as undefined.
    expect(row.held_out_version ?? null).toBeNull();
    expect(row.batch_id).toBe(programId.startsWith("g1") ? "run-1" : null);
  }
}

/** Advantages: each rewarded call's output tokens, equal to the batch's samples at that call's model tokens. */
function expectAdvantages(rows: Record<string, unknown>[], samples: readonly ScoredSample[], opts: { f32?: boolean } = {}): void {
  for (const row of rows) {
    const adv = row.advantages as number[] | null;
    if (row.batch_id === null) {
      if (opts.f32) expect((adv ?? []).every(Number.isNaN)).toBe(true);
      // hyparquet reads a null list as undefined.
      else expect(adv ?? null).toBeNull();
      continue;
    }
    const s = samples.find((x) => x.callIds.includes(row.call_id as string));
    expect(s, String(row.call_id)).toBeDefined();
    // Every fixture call is trainable, so a call's chunk is its index.
    const chunk = row.call_index as number;
    const want = s!.advantages.filter((_, i) => s!.lossMask[i] === 1 && s!.chunks[i] === chunk);
    expect(adv).toEqual(opts.f32 ? want.map(Math.fround) : want);
    expect(adv).toHaveLength((row.output_ids as number[]).length);
    // GRPO over g1's rewards [1, 0.25]: the better program is pushed up, the other down.
    expect(Math.sign(adv![0]!)).toBe(row.program_id === "g1-p0" ? 1 : -1);
  }
}

describe("exportStore", () => {
  it("parquet: an independent reader (hyparquet) reads back every call and the batch", async () => {
    const r = await exportAs("parquet");
    expect(r.rows).toBe(fixture.calls.length);
    expect(r.batches.map((b) => b.runId)).toEqual(["run-1"]);
    expect(r.skipped).toEqual([{ runId: "run-2", reason: "no group has a reward for every program" }]);
    const file = readFileSync(r.trajectoriesPath);
    const buf = file.buffer.slice(file.byteOffset, file.byteOffset + file.byteLength);
    const rows = (await parquetReadObjects({ file: buf })).map((x) => plain(x) as Record<string, unknown>);
    expectRowsEqualStore(rows);
    // The batch, as its Arrow twin holds it: one row per token of each sample.
    const arrowBatch = readArrowBatch((await exportAs("arrow")).batches[0]!.path);
    expectAdvantages(rows, arrowBatch.samples);
    const bfile = readFileSync(r.batches[0]!.path);
    const brows = (await parquetReadObjects({ file: bfile.buffer.slice(bfile.byteOffset, bfile.byteOffset + bfile.byteLength) })).map((x) => plain(x) as Record<string, number>);
    const tokens = arrowBatch.samples.flatMap((s, si) => s.tokenIds.map((t, i) => ({ sample: si, token_index: i, token_id: t, loss_mask: s.lossMask[i], advantage: s.advantages[i], old_logprob: s.oldLogprobs[i], version: s.versions[i], chunk: s.chunks[i] })));
    expect(brows.map((b) => ({ sample: b.sample, token_index: b.token_index, token_id: b.token_id, loss_mask: b.loss_mask, advantage: b.advantage, old_logprob: b.old_logprob, version: b.version, chunk: b.chunk }))).toEqual(tokens);
    const meta = parquetMetadata(bfile.buffer.slice(bfile.byteOffset, bfile.byteOffset + bfile.byteLength));
    expect(meta.num_rows).toBe(BigInt(tokens.length));
  });

  it("arrow: apache-arrow reads back every call; the batch reads back with the Arrow batch reader", async () => {
    const r = await exportAs("arrow");
    const table = tableFromIPC(readFileSync(r.trajectoriesPath));
    expect(table.schema.metadata.get("arbor.schema")).toBe("arbor.trajectories.v1");
    const rows = table.toArray().map((x) => plain(x.toJSON()) as Record<string, unknown>);
    expectRowsEqualStore(rows);
    const batch = readArrowBatch(r.batches[0]!.path);
    expect(batch.id).toBe("run-1");
    expect(batch.samples.map((s) => s.programId)).toEqual(["g1-p0", "g1-p1", "g1-p1"]);
    expectAdvantages(rows, batch.samples);
  });

  it("jsonl: one parsed line per call; the batch reads back with the JSONL reader", async () => {
    const r = await exportAs("jsonl");
    const rows = readFileSync(r.trajectoriesPath, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expectRowsEqualStore(rows);
    const samples = await readSamplesJsonl(r.batches[0]!.path);
    expect(samples).toEqual(readArrowBatch((await exportAs("arrow")).batches[0]!.path).samples);
    expectAdvantages(rows, samples);
  });

  it("safetensors: flat token tensors with offsets and the rows' fields in the metadata; the batch reads back as a tree", async () => {
    const r = await exportAs("safetensors");
    const { tensors, metadata } = readSafetensors(r.trajectoriesPath);
    expect(metadata["arbor.schema"]).toBe("arbor.trajectories.v1");
    const byName = new Map(tensors.map((t) => [t.name, t]));
    const list = (name: string, i: number): number[] => {
      const data = byName.get(name)!.data;
      const off = byName.get(`${name}_offsets`)!;
      expect(isIntTensor(off)).toBe(true);
      return Array.from(data.subarray(off.data[i], off.data[i + 1]));
    };
    const meta = JSON.parse(metadata["arbor.rows"]!) as Record<string, unknown>[];
    const rows = meta.map((m, i) => ({ ...m, prompt_ids: list("prompt_ids", i), output_ids: list("output_ids", i), logprobs: list("logprobs", i), policy_versions: list("policy_versions", i), advantages: list("advantages", i) }));
    expectRowsEqualStore(rows, { f32: true });
    const samples = readArrowBatch((await exportAs("arrow")).batches[0]!.path).samples;
    expectAdvantages(rows, samples, { f32: true });
    const tree = readTreeSafetensors(r.batches[0]!.path);
    expect(tree.batchId).toBe("run-1");
    expect(tree.tree.samplePaths.map((p) => p.length)).toEqual(samples.map((s) => s.tokenIds.length));
    // The prefix tree holds each sample's tokens along its path.
    samples.forEach((s, i) => expect(Array.from(tree.tree.samplePaths[i]!, (n) => tree.tree.tokens[n])).toEqual(s.tokenIds));
  });

  it("builds no batch from a held-out evaluation's run, however complete its groups", async () => {
    const store = new SqliteTrajectoryStore(fixture.path);
    try {
      const run = (await store.listRuns()).find((r) => r.id === "run-1")!;
      const trajectories = await store.listTrajectories(run.id);
      const groups = await store.listGroups(run.id);
      expect(typeof runBatch(run, trajectories, groups)).toBe("object");
      expect(runBatch({ ...run, configJson: heldOutRunConfigJson(run.configJson, "train-run") }, trajectories, groups)).toBe("held-out evaluation of run train-run: never trained on");
    } finally {
      await store.close();
    }
  });

  it("a sync run's groups make one batch per iteration, named as the loop named them (<run>-it<k>)", async () => {
    const path = join(dir, "iterations.sqlite");
    const store = new SqliteTrajectoryStore(path);
    try {
      await store.createRun({ ...fixtureRun("sync"), configJson: JSON.stringify({ train: { estimator: "grpo" } }) });
      for (const k of [1, 2]) {
        const g = { ...fixtureGroup(`sync/it${k}/g0`, "sync", 2, `t${k}`), iteration: k };
        await storeCompletedGroup(store, g);
      }
      const r = await exportStore(store, { format: "jsonl", out: join(dir, "iterations") });
      expect(r.batches.map((b) => [b.runId, b.iteration, b.path.split("/").pop(), b.samples])).toEqual([
        ["sync", 1, "sync-it1.jsonl", 2],
        ["sync", 2, "sync-it2.jsonl", 2],
      ]);
      const it2 = await readSamplesJsonl(r.batches[1]!.path);
      expect(new Set(it2.map((x) => x.groupId))).toEqual(new Set(["sync/it2/g0"]));
    } finally {
      await store.close();
    }
  });

  it("an iteration a kill or an abort cut before its batch (a group without a reward for every program) has no batch: it was never trained on", async () => {
    const path = join(dir, "cut.sqlite");
    const store = new SqliteTrajectoryStore(path);
    try {
      await store.createRun({ ...fixtureRun("cut"), configJson: JSON.stringify({ train: { estimator: "grpo" } }) });
      await storeCompletedGroup(store, { ...fixtureGroup("cut/it1/g0", "cut", 2, "t1"), iteration: 1 });
      // Iteration 2: one group ended and rewarded, the other's second program aborted by the stop, unrewarded.
      await storeCompletedGroup(store, { ...fixtureGroup("cut/it2/g0", "cut", 2, "t2"), iteration: 2 });
      const cut = { ...fixtureGroup("cut/it2/g1", "cut", 2, "t3"), iteration: 2 };
      await store.createGroup(cut);
      for (const [i, id] of cut.programIds.entries()) {
        await store.createProgram(fixtureProgram(cut, i));
        await store.recordCall(fixtureCall(id, 0, [-0.5]));
        await store.endProgram(id, i === 0 ? { kind: "completed" } : { kind: "aborted", detail: "run aborted (received SIGTERM)" }, 10);
        if (i === 0) await store.setReward(id, { total: 1, components: { outcome: 1 } });
      }
      const r = await exportStore(store, { format: "jsonl", out: join(dir, "cut") });
      expect(r.batches.map((b) => [b.iteration, b.samples])).toEqual([[1, 2]]);
      expect(r.skipped).toEqual([
        { runId: "cut", iteration: 2, reason: "iteration 2 was cut before its batch was taken (1 of its 2 groups have a reward for every program): never trained on" },
      ]);
      expect(existsSync(join(dir, "cut", "batches", "cut-it2.jsonl"))).toBe(false);
    } finally {
      await store.close();
    }
  });

  it("a run's held-out evaluation groups are in its trajectory rows (held_out_version) and in no batch, complete as they are", async () => {
    const path = join(dir, "held-out.sqlite");
    const store = new SqliteTrajectoryStore(path);
    try {
      await store.createRun({ ...fixtureRun("r"), configJson: JSON.stringify({ train: { estimator: "grpo" } }) });
      const groups = [
        { ...fixtureGroup("r/eval-v0/g0", "r", 2, "h0"), heldOutVersion: 0 },
        { ...fixtureGroup("r/it1/g0", "r", 2, "t1"), iteration: 1 },
        { ...fixtureGroup("r/eval-v1/g0", "r", 2, "h0"), heldOutVersion: 1 },
      ];
      for (const g of groups) {
        await storeCompletedGroup(store, g);
      }
      const r = await exportStore(store, { format: "jsonl", out: join(dir, "held-out") });
      expect(r.batches.map((b) => [b.runId, b.iteration, b.path.split("/").pop(), b.samples])).toEqual([["r", 1, "r-it1.jsonl", 2]]);
      expect(r.skipped).toEqual([]);
      const samples = await readSamplesJsonl(r.batches[0]!.path);
      expect(new Set(samples.map((x) => x.groupId))).toEqual(new Set(["r/it1/g0"]));
      const rows = readFileSync(r.trajectoriesPath, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(rows.map((x) => [x.group_id, x.held_out_version, x.batch_id])).toEqual([
        ["r/eval-v0/g0", 0, null],
        ["r/eval-v0/g0", 0, null],
        ["r/it1/g0", null, "r-it1"],
        ["r/it1/g0", null, "r-it1"],
        ["r/eval-v1/g0", 1, null],
        ["r/eval-v1/g0", 1, null],
      ]);
    } finally {
      await store.close();
    }
  });

  it("an iteration a kill cut and the resumed run rolled out again has the last attempt's groups in its batch", async () => {
    const path = join(dir, "resumed.sqlite");
    const store = new SqliteTrajectoryStore(path);
    try {
      await store.createRun({ ...fixtureRun("r"), configJson: JSON.stringify({ train: { estimator: "grpo" } }) });
      // The cut attempt's group ended whole (rewarded) before the kill: still not what iteration 2 trained on.
      await storeCompletedGroup(store, { ...fixtureGroup("r/it2/g0", "r", 2, "t2"), iteration: 2 });
      await storeCompletedGroup(store, { ...fixtureGroup("r/it2-r1/g0", "r", 2, "t2"), iteration: 2, attempt: 1 });
      const r = await exportStore(store, { format: "jsonl", out: join(dir, "resumed") });
      expect(r.batches.map((b) => [b.runId, b.iteration, b.samples])).toEqual([["r", 2, 2]]);
      const samples = await readSamplesJsonl(r.batches[0]!.path);
      expect(new Set(samples.map((x) => x.groupId))).toEqual(new Set(["r/it2-r1/g0"]));
      const rows = readFileSync(r.trajectoriesPath, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
      // Each row says its iteration and attempt, and whether a later attempt superseded its group.
      expect(rows.map((x) => [x.group_id, x.iteration, x.attempt, x.superseded, x.batch_id])).toEqual([
        ["r/it2/g0", 2, null, true, null],
        ["r/it2/g0", 2, null, true, null],
        ["r/it2-r1/g0", 2, 1, false, "r-it2"],
        ["r/it2-r1/g0", 2, 1, false, "r-it2"],
      ]);
    } finally {
      await store.close();
    }
  });

  it("a run whose stored estimator config is refused has no batch, with the reason; the other runs export", async () => {
    const path = join(dir, "refused.sqlite");
    const store = new SqliteTrajectoryStore(path);
    try {
      await store.createRun({ ...fixtureRun("old"), configJson: JSON.stringify({ train: { estimator: "grpo", estimatorOptions: { epz: 0.1 } } }) });
      await store.createRun({ ...fixtureRun("ok"), configJson: JSON.stringify({ train: { estimator: "grpo" } }) });
      await storeCompletedGroup(store, fixtureGroup("old/g0", "old", 2, "a"));
      await storeCompletedGroup(store, fixtureGroup("ok/g0", "ok", 2, "b"));
      const r = await exportStore(store, { format: "jsonl", out: join(dir, "refused") });
      expect(r.batches.map((b) => b.runId)).toEqual(["ok"]);
      expect(r.skipped).toHaveLength(1);
      expect(r.skipped[0]!.runId).toBe("old");
      expect(r.skipped[0]!.reason).toMatch(/^its stored config is refused: train\.estimatorOptions\.epz: not an option of estimator 'grpo'/);
      expect(r.rows).toBe(4);
    } finally {
      await store.close();
    }
  });

  it("refuses an unknown format, naming the known ones", () => {
    expect(() => checkExportFormat("csv")).toThrow("--format: unknown format 'csv' (known: parquet, jsonl, arrow, safetensors)");
  });
});
