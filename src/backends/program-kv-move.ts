// Moving a program's KV from one engine to another through the tier they share (issue 16: the global KV
// pool as the engines' L3, engine/kv/pooled-state-tier.ts): the origin puts the program's KV there
// (`shareProgram`, which pauses the program on it) and the target's restore learns of it. The gateway
// moves a paused program restored on another engine (gateway/pausing/) and a divided rollout's context
// when its next chunk runs on another engine (gateway/divided/). The caller restores the origin.
import type { TokenBackend } from "./backend.js";

/** A backend that can give a program's KV away. */
export type KvOrigin = TokenBackend & Required<Pick<TokenBackend, "shareProgram" | "restore">>;
/** A backend that can take one in. */
export type KvTarget = TokenBackend & Required<Pick<TokenBackend, "restore">>;

/** Whether `from` can share a program's KV and `to` restore it. */
export function canMoveProgramKv(from: TokenBackend, to: TokenBackend): boolean {
  return typeof from.shareProgram === "function" && typeof from.restore === "function" && typeof to.restore === "function";
}

/**
 * Move program `programId`'s KV from `from` to `to`; resolves with the tokens of it `to` can load now
 * (0: it found none). Throws the backends' own errors (an origin without a shared tier answers HTTP 400).
 */
export async function moveProgramKv(from: KvOrigin, to: KvTarget, programId: string): Promise<number> {
  await from.shareProgram(programId);
  const got = await to.restore(programId);
  return got?.kvTokens ?? 0;
}
