// Weighted composition of reward functions into one Reward: total = Σ weight·component, with each
// component stored unweighted so analysis can re-weight without recomputing. With `stepRewards`,
// the weighted total is also split over the program's trainable calls as `step:<k>` components
// (the per-step r_p of Forge's reward-to-go, TECHNIQUES §E; the batch builder's reward-to-go
// estimator turns them into Â_t = Σ_{p≥t} r_p − B).
import { ArborError } from "../core/errors.js";
import type { Reward, Trajectory } from "../core/types.js";
import { callsInOrder } from "./call-steps.js";
import type { RewardContext, RewardFn, RewardValue } from "./reward-fn.js";

export interface WeightedRewardFn {
  fn: RewardFn;
  weight: number;
}

export interface ComposeOptions {
  /** Add `step:<k>` components (k = trainable-call ordinal) that sum to the total. */
  stepRewards?: boolean;
}

/** A composition of reward functions. */
export interface ComposedReward {
  /** Component names, in composition order. */
  readonly names: string[];
  /** Some component is relative to the group: use `computeGroup`. */
  readonly needsGroup: boolean;
  /** Some component is asynchronous: use `computeGroup`. */
  readonly isAsync: boolean;
  /** One program's reward, synchronously; refuses compositions with group or async components. */
  compute(ctx: RewardContext): Reward;
  /** The rewards of one group's programs (in the order given); works for every composition. */
  computeGroup(ctxs: readonly RewardContext[]): Promise<Reward[]>;
}

/**
 * Compose reward functions. Throws an {@link ArborError} for an empty list, a duplicate name or a
 * non-finite weight; computing throws if a component returns a non-finite value or a bad step split.
 */
export function composeRewards(fns: WeightedRewardFn[], opts: ComposeOptions = {}): ComposedReward {
  if (fns.length === 0) throw new ArborError("reward: need at least one reward function", "reward");
  const names = new Set<string>();
  for (const { fn, weight } of fns) {
    if (names.has(fn.name)) throw new ArborError(`reward.${fn.name}: listed twice`, "reward");
    if (fn.name.startsWith("step:")) throw new ArborError(`reward.${fn.name}: the 'step:' prefix is reserved for per-step rewards`, "reward");
    names.add(fn.name);
    if (typeof weight !== "number" || !Number.isFinite(weight)) {
      throw new ArborError(`reward.${fn.name}: weight must be a finite number, got ${String(weight)}`, "reward");
    }
  }
  const needsGroup = fns.some((f) => f.fn.needsGroup === true);
  const isAsync = fns.some((f) => f.fn.isAsync === true);

  const assemble = (ctx: RewardContext, values: RewardValue[]): Reward => {
    const programId = ctx.trajectory.program.id;
    const calls = callsInOrder(ctx.trajectory);
    let total = 0;
    const components: Record<string, number> = {};
    const perCall = new Array<number>(calls.length).fill(0);
    fns.forEach(({ fn, weight }, i) => {
      const v = values[i] as RewardValue;
      const value = typeof v === "number" ? v : v?.value;
      if (typeof value !== "number" || !Number.isFinite(value)) {
        throw new ArborError(`reward.${fn.name}: returned ${String(value)} for program '${programId}'`, "reward");
      }
      components[fn.name] = value;
      total += weight * value;
      if (!opts.stepRewards || calls.length === 0) return;
      if (typeof v === "number") {
        perCall[calls.length - 1] = (perCall[calls.length - 1] as number) + weight * value;
        return;
      }
      checkSteps(fn.name, programId, v.steps, value, calls.length);
      v.steps.forEach((s, k) => (perCall[k] = (perCall[k] as number) + weight * s));
    });
    if (opts.stepRewards) Object.assign(components, stepComponents(calls, perCall));
    return { total, components };
  };

  return {
    names: [...names],
    needsGroup,
    isAsync,
    compute(ctx: RewardContext): Reward {
      const blocking = fns.find((f) => f.fn.needsGroup === true || f.fn.isAsync === true);
      if (blocking) {
        const why = blocking.fn.needsGroup ? "is relative to the program's group" : "is asynchronous";
        throw new ArborError(`reward.${blocking.fn.name}: ${why}; compute rewards per group with computeGroup()`, "reward");
      }
      return assemble(ctx, fns.map(({ fn }) => fn.compute(ctx) as RewardValue));
    },
    async computeGroup(ctxs: readonly RewardContext[]): Promise<Reward[]> {
      const group = ctxs.map((c) => ({ ...c }));
      for (const c of group) c.group = group;
      // A group's programs are scored concurrently (a judge call each); the group size bounds it.
      return Promise.all(group.map(async (c) => assemble(c, await Promise.all(fns.map(async ({ fn }) => fn.compute(c))))));
    },
  };
}

function checkSteps(name: string, programId: string, steps: unknown, value: number, calls: number): void {
  if (!Array.isArray(steps) || steps.length !== calls) {
    throw new ArborError(`reward.${name}: gave ${Array.isArray(steps) ? steps.length : "no"} steps for program '${programId}' with ${calls} calls`, "reward");
  }
  let sum = 0;
  for (const s of steps) {
    if (typeof s !== "number" || !Number.isFinite(s)) throw new ArborError(`reward.${name}: step value ${String(s)} for program '${programId}'`, "reward");
    sum += s;
  }
  if (Math.abs(sum - value) > 1e-9 * Math.max(1, Math.abs(value))) {
    throw new ArborError(`reward.${name}: steps sum to ${sum} but the value is ${value} for program '${programId}'`, "reward");
  }
}

/**
 * `step:<k>` components over trainable calls (k = trainable-call ordinal, the batch builder's
 * chunk index). A text-only call cannot be trained on, so its share moves to the next trainable
 * call (the one that acted on its result), or to the last trainable call when none follows.
 */
function stepComponents(calls: Trajectory["calls"], perCall: number[]): Record<string, number> {
  const trainable = calls.map((c) => c.trainable !== false);
  const count = trainable.filter(Boolean).length;
  if (count === 0) return {};
  const steps = new Array<number>(count).fill(0);
  let carry = 0;
  let k = 0;
  perCall.forEach((v, i) => {
    if (!trainable[i]) {
      carry += v;
      return;
    }
    steps[k] = (steps[k] as number) + carry + v;
    carry = 0;
    k++;
  });
  steps[count - 1] = (steps[count - 1] as number) + carry;
  return Object.fromEntries(steps.map((s, i) => [`step:${i}`, s]));
}
