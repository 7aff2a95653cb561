// A small real SQLite store for the tests of `arbor inspect` and `arbor export`: two runs written through the
// store's API with the shared fixtures (store-fixtures.ts). Run `run-1` (env calc, Arbor's vocabulary, GRPO)
// has group g1, two rewarded programs of two calls each (the second continuing the first; a tool call, a
// context-management event and a context reset), and group g2, one program ended without a reward. Run `run-2`
// has one program aborted without a reward. Token ids are Arbor's vocabulary's, so they decode to the texts below.
import type { Call } from "../core/types.js";
import { Vocab } from "../model/vocab.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";
import { fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "./store-fixtures.js";

/** What the store holds, as written (calls with their exact ids and logprobs). */
export interface InspectStore {
  path: string;
  calls: Call[];
  /** The texts the first program's calls' ids encode. */
  texts: { prompt0: string; output0: string; toolTurn: string; output1: string };
  rewards: Record<string, number>;
}

const vocab = new Vocab();
const ids = (text: string): number[] => vocab.encode(text);
const specialIds = (text: string): number[] => vocab.encode(text, { special: true });

/** A call of `programId` whose ids encode the given texts, with distinct finite logprobs. */
function call(programId: string, index: number, promptIds: number[], outputText: string, extra: Partial<Call> = {}): Call {
  const outputIds = specialIds(outputText);
  const base = fixtureCall(programId, index, outputIds.map((_, i) => -(i + 1) / 7 - index / 3), promptIds.length);
  return { ...base, promptTokenIds: promptIds, outputTokenIds: outputIds, outputText, servedModel: "arbor-tiny", policyVersion: 2, ...extra };
}

/** Write the SQLite store at `path` (it must not exist). */
export async function writeInspectStore(path: string): Promise<InspectStore> {
  return { path, ...(await fillInspectStore(new SqliteTrajectoryStore(path))) };
}

/** Write the runs into `store` (any kind, empty), then close it. */
export async function fillInspectStore(store: TrajectoryStore): Promise<Omit<InspectStore, "path">> {
  const calls: Call[] = [];
  const texts = {
    prompt0: "<|system|>Use the calc tool.<|end|><|user|>What is 6*7?<|end|><|assistant|>",
    output0: '<|tool_call|>{"name":"calc","arguments":{"expr":"6*7"}}<|/tool_call|><|end|>',
    toolTurn: "<|tool|>42<|end|><|assistant|>",
    output1: "The answer is 42.<|end|>",
  };
  const rewards: Record<string, number> = { "g1-p0": 1, "g1-p1": 0.25 };
  const config = { name: "inspect-test", model: { vocab: "arbor" }, env: { name: "calc" }, train: { estimator: "grpo" } };
  await store.createRun({ ...fixtureRun("run-1"), configJson: JSON.stringify(config) });
  const g1 = fixtureGroup("g1", "run-1", 2, "calc-7");
  await store.createGroup(g1);
  for (const [i, id] of g1.programIds.entries()) {
    await store.createProgram(fixtureProgram(g1, i));
    const c0 = call(id, 0, specialIds(texts.prompt0), texts.output0);
    // The second call continues the first: its prompt is the first's prompt ‖ output ‖ the tool turn.
    const c1 =
      i === 0
        ? call(id, 1, [...c0.promptTokenIds, ...c0.outputTokenIds, ...specialIds(texts.toolTurn)], texts.output1, { tokenPolicyVersions: specialIds(texts.output1).map((_, k) => (k < 2 ? 1 : 2)) })
        : call(id, 1, specialIds("<|user|>Again: 6*7?<|end|><|assistant|>"), "It is 42.<|end|>", {
            contextReset: true,
            contextResetReason: "history differs",
            // A black-box client's own model name and a max_tokens the gateway clamped.
            requestedModel: "claude-sonnet-4-5",
            maxTokensClamped: { asked: 64_000, granted: 900 },
          });
    for (const c of [c0, c1]) {
      if (i === 1 && c.index === 1) {
        await store.recordContextEvent({ programId: id, callIndex: 1, policy: "discard-all", action: "discard", tokensBefore: c0.promptTokenIds.length + c0.outputTokenIds.length, tokensAfter: 0, messagesBefore: 3, messagesAfter: 0, detail: "dropped the history" });
      }
      await store.recordCall(c);
      calls.push(c);
      if (c.index === 0) await store.recordTool({ programId: id, callIndex: 0, tool: "calc", input: '{"expr":"6*7"}', output: "42", ok: true, durationMs: 3 });
    }
    await store.endProgram(id, { kind: "completed" }, 5000 + i);
    await store.setReward(id, { total: rewards[id] as number, components: { outcome: rewards[id] as number, format: 1 } });
  }
  const g2 = fixtureGroup("g2", "run-1", 1, "calc-8");
  await store.createGroup(g2);
  await store.createProgram(fixtureProgram(g2, 0));
  const c = call("g2-p0", 0, ids("What is 1+1?"), "2");
  await store.recordCall(c);
  calls.push(c);
  await store.endProgram("g2-p0", { kind: "max_turns", detail: "3 turns" }, 6000);
  await store.finishRun("run-1", 7000);
  await store.createRun({ ...fixtureRun("run-2"), configJson: JSON.stringify(config) });
  const g3 = fixtureGroup("g3", "run-2", 1, "calc-9");
  await store.createGroup(g3);
  await store.createProgram(fixtureProgram(g3, 0));
  const d = call("g3-p0", 0, ids("Hi"), "Hello");
  await store.recordCall(d);
  calls.push(d);
  await store.endProgram("g3-p0", { kind: "aborted", detail: "run cut" }, 8000);
  await store.finishRun("run-2", 9000);
  await store.close();
  return { calls, texts, rewards };
}
