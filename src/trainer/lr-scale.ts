// Per-tensor learning-rate multipliers for the reference trainer (config `train.lrScale`): Adam normalises each
// coordinate's step, so a direction every task agrees on but that needs a large move (e.g. the output norm's
// scale, which sets how sharp the policy's distribution is) moves only about lr per step whatever its gradient.
// A multiplier c on a tensor makes its step c × Adam's: the weights before the update are kept and the update
// is stretched, w ← w₀ + c·(w₁ − w₀), which is exactly Adam with lr·c on that tensor (Adam's moments do not
// depend on the learning rate, so the optimizer state and its save/restore are unchanged).
import * as tf from "@tensorflow/tfjs";
import { ArborError } from "../core/errors.js";

/** A compiled `lrScale`: which parameters (by GGUF name) get which multiplier. */
export interface LrScale {
  readonly scaled: ReadonlyMap<string, number>;
}

/**
 * Resolve `spec` (GGUF tensor name or pattern with `*` → multiplier) against the model's parameter names.
 * A name matched by several patterns takes the first pattern's multiplier.
 * @throws ArborError naming the key when a multiplier is not a positive finite number or a pattern matches
 *   no parameter.
 */
export function compileLrScale(spec: Readonly<Record<string, number>>, names: readonly string[]): LrScale {
  const scaled = new Map<string, number>();
  for (const [pattern, c] of Object.entries(spec)) {
    if (!(Number.isFinite(c) && c > 0)) throw new ArborError(`trainer: lrScale['${pattern}'] must be a positive number, got ${c}`, "config");
    const re = new RegExp(`^${pattern.split("*").map(escapeRegExp).join(".*")}$`);
    const hit = names.filter((n) => re.test(n));
    if (hit.length === 0) {
      throw new ArborError(`trainer: lrScale['${pattern}'] matches no parameter (parameters: ${names.slice(0, 12).join(", ")}${names.length > 12 ? ", …" : ""})`, "config");
    }
    for (const n of hit) if (!scaled.has(n)) scaled.set(n, c);
  }
  return { scaled };
}

/**
 * Run `update` (one optimizer step on `params`) and stretch the step of every scaled parameter by its multiplier.
 * Multipliers of exactly 1 cost nothing.
 */
export function withLrScale(scale: LrScale, param: (name: string) => tf.Variable, update: () => void): void {
  const active = [...scale.scaled].filter(([, c]) => c !== 1);
  const before = active.map(([name]) => tf.clone(param(name)));
  try {
    update();
    active.forEach(([name, c], i) => {
      const v = param(name);
      const w0 = before[i] as tf.Tensor;
      tf.tidy(() => v.assign(w0.add(v.sub(w0).mul(c))));
    });
  } finally {
    tf.dispose(before);
  }
}

function escapeRegExp(s: string): string {
  return s.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
}
