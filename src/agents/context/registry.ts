// The context-management policies, selected by name: none, discard-all, clear-thinking, summarize.
import { z } from "../../core/zod.js";
import { ArborError } from "../../core/errors.js";
import { createClearThinkingPolicy } from "./clear-thinking.js";
import type { ContextPolicy } from "./context-policy.js";
import { createDiscardAllPolicy } from "./discard-all.js";
import { createNonePolicy } from "./none.js";
import { createSummarizePolicy } from "./summarize.js";

const window = z.number().int().positive();
const threshold = z.number().gt(0).lte(1).optional();

/** Configuration of one policy (as in a run's YAML `agent.context`). */
export const contextPolicyConfigSchema = z.discriminatedUnion("name", [
  z.object({ name: z.literal("none") }).strict(),
  z.object({ name: z.literal("discard-all"), windowTokens: window, threshold, note: z.string().optional() }).strict(),
  z.object({ name: z.literal("clear-thinking"), open: z.string().min(1).optional(), close: z.string().min(1).optional() }).strict(),
  z
    .object({
      name: z.literal("summarize"),
      windowTokens: window,
      threshold,
      keepLast: z.number().int().nonnegative().optional(),
      summarizer: z.enum(["model", "extractive"]).optional(),
      summaryTokens: z.number().int().positive().optional(),
      maxSummaryChars: z.number().int().positive().optional(),
    })
    .strict(),
]);
export type ContextPolicyConfig = z.infer<typeof contextPolicyConfigSchema>;

export const CONTEXT_POLICIES = ["none", "discard-all", "clear-thinking", "summarize"] as const;

/** Build a policy from its configuration; throws an ArborError naming the bad field. */
export function createContextPolicy(config: unknown): ContextPolicy {
  const parsed = contextPolicyConfigSchema.safeParse(config);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? `agent.context.${issue.path.join(".")}` : "agent.context";
    throw new ArborError(`${where}: ${issue?.message ?? "invalid"} (policies: ${CONTEXT_POLICIES.join(", ")})`, "config");
  }
  const c = parsed.data;
  switch (c.name) {
    case "none":
      return createNonePolicy();
    case "discard-all":
      return createDiscardAllPolicy(c);
    case "clear-thinking":
      return createClearThinkingPolicy(c);
    case "summarize":
      return createSummarizePolicy(c);
  }
}
