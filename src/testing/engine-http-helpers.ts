// Test helpers for the engine's HTTP layer: an executor whose steps the test releases one at a time
// (deterministic timing of weight switches against running requests), and small request helpers.
import { expect } from "vitest";
import { Vocab } from "../model/vocab.js";
import type { GenerateRequest } from "../engine/executor.js";
import { ScriptedExecutor, type PacedOptions, type ScriptedTokens } from "./scripted-executor.js";
import type { EngineServer } from "../engine/server.js";

const vocab = new Vocab();

export interface GatedExecutorOptions extends PacedOptions {
  /** The output token at this index is `</s>` (finish reason "stop"). */
  stopAt?: number;
}

/** A paced executor ({@link ScriptedExecutor}) whose generations advance one token per tick; its tokens spell `letter`. */
export type GatedExecutor = ScriptedExecutor;

/** A {@link GatedExecutor} spelling `letter` up to max_tokens (or `</s>` at `opts.stopAt`); context 128, 2 sequences. */
export function gatedExecutor(letter: string, opts: GatedExecutorOptions = {}): GatedExecutor {
  const id = vocab.encode(letter)[0]!;
  const answer = (_prompt: string, req: GenerateRequest): ScriptedTokens =>
    opts.stopAt !== undefined && opts.stopAt < req.maxTokens
      ? { tokenIds: Array<number>(opts.stopAt).fill(id), stopTokenId: vocab.eosId }
      : { tokenIds: Array<number>(req.maxTokens).fill(id) };
  return new ScriptedExecutor(answer, { contextSize: 128, sequences: 2, paced: opts });
}

/** Wait (event-loop turns, no timers) until `cond` holds. */
export async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; !cond() && i < 100_000; i++) await new Promise((r) => setImmediate(r));
  expect(cond()).toBe(true);
}

/** Advance every generation of `ex` by one token and wait until it is produced. */
export async function step(ex: GatedExecutor): Promise<void> {
  const target = ex.produced + ex.running;
  ex.tick();
  await until(() => ex.produced >= target);
}

/** POST a JSON body through `app.inject`. */
export async function post(target: EngineServer, url: string, payload: unknown) {
  const res = await target.app.inject({ method: "POST", url, payload: payload as object });
  return { status: res.statusCode, body: res.json(), headers: res.headers, text: res.body };
}
