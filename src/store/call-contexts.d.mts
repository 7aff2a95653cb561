// Types of call-contexts.mjs (the stores' call deltas, plain JavaScript as the SQLite writer is).

/** A program's last committed call: its index, prompt then output ids (encoded), each message's JSON. */
export interface CallContext {
  index: number;
  context: Int32Array;
  messages: string[];
}

/** How a call is stored: over the call at `baseIdx` (null: whole), with the ids and messages after the shared ones. */
export interface CallDelta {
  baseIdx: number | null;
  promptShared: number;
  messagesShared: number;
  promptRest: Int32Array;
  /** A JSON list. */
  messagesRest: string;
}

export function int32s(bytes: Uint8Array): Int32Array;
export function deltaOver(base: CallContext | undefined, prompt: Int32Array, messages: readonly string[]): CallDelta;
export function contextOf(index: number, prompt: Int32Array, output: Int32Array, messages: string[]): CallContext;

/** The last committed call of each program, bounded by programs and bytes (oldest first out). */
export class CallContexts {
  constructor(maxPrograms?: number, maxBytes?: number);
  readonly maxPrograms: number;
  readonly maxBytes: number;
  get(programId: string): CallContext | undefined;
  set(programId: string, ctx: CallContext): void;
  forget(programId: string): void;
  clear(): void;
  readonly size: number;
}
