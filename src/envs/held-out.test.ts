import { describe, expect, it } from "vitest";
import type { Environment, Task } from "./env.js";
import { splitHeldOut } from "./held-out.js";
import { createEnvironment } from "./registry.js";

/** An environment whose task i asks question `questions[i % questions.length]` (so questions repeat). */
function repeating(questions: readonly string[], taskCount?: number): Environment {
  const calc = createEnvironment("calc");
  return {
    ...calc,
    name: "repeating",
    ...(taskCount !== undefined ? { taskCount } : {}),
    tasks: (count: number): Task[] =>
      Array.from({ length: count }, (_, i) => ({ id: `t${i}`, prompt: [{ role: "user" as const, content: questions[i % questions.length] as string }], meta: {} })),
  };
}

describe("splitHeldOut", () => {
  it("trains on the run's own draw and holds out later tasks none of which shares a training prompt", () => {
    const env = createEnvironment("calc");
    const { train, heldOut } = splitHeldOut(env, 7, 24, 32);
    // The training tasks are exactly what the run draws (env.tasks(n·iterations, seed)).
    expect(train).toEqual(env.tasks(24, 7));
    expect(heldOut).toHaveLength(32);
    const trainIds = new Set(train.map((t) => t.id));
    const trainPrompts = new Set(train.map((t) => JSON.stringify(t.prompt)));
    for (const t of heldOut) {
      expect(trainIds.has(t.id)).toBe(false);
      expect(trainPrompts.has(JSON.stringify(t.prompt))).toBe(false);
    }
    expect(new Set(heldOut.map((t) => JSON.stringify(t.prompt))).size).toBe(32);
    // Fixed: the same split for the same seed and sizes.
    expect(splitHeldOut(env, 7, 24, 32)).toMatchObject({ train, heldOut });
  });

  it("skips a later task that repeats a training question (disjoint by content, not only by id)", () => {
    const env = repeating(["a", "b", "c", "a", "d", "b", "e"]);
    const { train, heldOut } = splitHeldOut(env, 1, 3, 2);
    expect(train.map((t) => t.prompt[0]?.content)).toEqual(["a", "b", "c"]);
    // t3 ("a") and t5 ("b") were trained on under other ids.
    expect(heldOut.map((t) => [t.id, t.prompt[0]?.content])).toEqual([
      ["t4", "d"],
      ["t6", "e"],
    ]);
  });

  it("refuses more held-out tasks than the environment has, naming eval.tasks", () => {
    expect(() => splitHeldOut(repeating(["a", "b", "c", "d"], 4), 1, 3, 2)).toThrow(/eval\.tasks: repeating has 4 tasks; 3 are trained on, so at most 1 can be held out, not 2/);
    expect(() => splitHeldOut(repeating(["a", "b"]), 1, 2, 3)).toThrow(/eval\.tasks: only 0 of the \d+ repeating tasks after the 2 training ones differ from them/);
  });
});
