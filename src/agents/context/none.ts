// The `none` context policy: the conversation only grows (the baseline).
import type { ContextPolicy } from "./context-policy.js";

/** Never changes the context. */
export function createNonePolicy(): ContextPolicy {
  return { name: "none", apply: () => undefined };
}
