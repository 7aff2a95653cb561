// The writing side of storing a program's calls as deltas (call-delta.ts says why and how they are read back):
// the last committed call of each program, bounded, and a new call's delta over it. The SQLite store runs it in
// its writer (thread or, for `:memory:`, in process), which alone knows what has committed, so the thread that
// serves requests pays nothing for it; the Postgres store keeps one per store object, set once a call's batch
// has committed. Either way a call is only ever stored over a row that exists and holds what it is compared
// with. Plain JavaScript, as the SQLite writer is (types: call-contexts.d.mts).
import { commonPrefix } from "../core/common-prefix.mjs";

/** Encoded ids (Int32 per id, the store's encoding) of a byte view: a view where aligned, else a copy. */
export function int32s(bytes) {
  if (bytes.byteOffset % 4 === 0) return new Int32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  return new Int32Array(new Uint8Array(bytes).buffer);
}

/**
 * How a call is stored over `base` ({index, context: prompt then output ids, messages: JSON each}), or whole
 * (no base) where it shares nothing with it: {baseIdx, promptShared, messagesShared, promptRest (ids),
 * messagesRest (a JSON list)}.
 */
export function deltaOver(base, prompt, messages) {
  let promptShared = 0;
  let messagesShared = 0;
  if (base !== undefined) {
    promptShared = commonPrefix(base.context, prompt);
    const m = Math.min(messages.length, base.messages.length);
    while (messagesShared < m && messages[messagesShared] === base.messages[messagesShared]) messagesShared++;
  }
  return {
    baseIdx: promptShared === 0 && messagesShared === 0 ? null : base.index,
    promptShared,
    messagesShared,
    promptRest: prompt.subarray(promptShared),
    messagesRest: `[${messages.slice(messagesShared).join(",")}]`,
  };
}

/** A call's context for the next call's delta: its prompt's ids then its output's (copied), its messages' JSON. */
export function contextOf(index, prompt, output, messages) {
  const context = new Int32Array(prompt.length + output.length);
  context.set(prompt);
  context.set(output, prompt.length);
  return { index, context, messages };
}

function sizeOf(ctx) {
  let n = ctx.context.byteLength;
  for (const m of ctx.messages) n += 2 * m.length;
  return n;
}

/**
 * The last committed call of each program, bounded by programs and bytes (the oldest go first; one larger
 * than the byte bound alone is not kept): a program without one stores its next call whole.
 */
export class CallContexts {
  constructor(maxPrograms = 1024, maxBytes = 128 * 1024 * 1024) {
    this.maxPrograms = maxPrograms;
    this.maxBytes = maxBytes;
    /** programId → {ctx, size}: the size counted once, when it is kept. */
    this.byProgram = new Map();
    this.bytes = 0;
  }

  get(programId) {
    return this.byProgram.get(programId)?.ctx;
  }

  set(programId, ctx) {
    this.forget(programId);
    const size = sizeOf(ctx);
    if (size > this.maxBytes) return;
    this.byProgram.set(programId, { ctx, size });
    this.bytes += size;
    for (const id of this.byProgram.keys()) {
      if (this.byProgram.size <= this.maxPrograms && this.bytes <= this.maxBytes) break;
      this.forget(id);
    }
  }

  forget(programId) {
    const entry = this.byProgram.get(programId);
    if (entry === undefined) return;
    this.byProgram.delete(programId);
    this.bytes -= entry.size;
  }

  clear() {
    this.byProgram.clear();
    this.bytes = 0;
  }

  get size() {
    return this.byProgram.size;
  }
}
