// `oracle-lfs`: longest-first with the true output lengths, over the same divided rollout as seer.
// It needs each request's `oracleLength` (known only in simulation), so it is for evaluation only:
// the bound seer's estimates are measured against.
import { ArborError } from "../../core/errors.js";
import { createDividedScheduler } from "./divided-scheduler.js";
import type { RolloutScheduler, SchedulerOptions } from "./types.js";

/** Create the oracle-lfs policy. */
export function createOracleLfsScheduler(opts: SchedulerOptions = {}): RolloutScheduler {
  return createDividedScheduler(
    "oracle-lfs",
    {
      validate(group) {
        for (const r of group.requests) {
          const n = r.oracleLength;
          if (n === undefined || !Number.isInteger(n) || n < 1) {
            throw new ArborError(`oracle-lfs: request ${r.id} has no oracleLength (evaluation only: simulated workloads carry it)`, "invalid_request");
          }
        }
      },
      key: (e) => [-(e.req.oracleLength as number)],
    },
    opts,
  );
}
