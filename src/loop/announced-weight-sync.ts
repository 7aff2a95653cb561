// Weight syncs that tell a deployment's other parts (issue 16): once every engine serves a new policy
// version, a `policy-version` event goes on the cluster's event bus, de-duplicated by version and
// checkpoint, so a sync retried after a crash announces once. The trainer-api service announces what an
// external trainer published; `arbor run --cluster` what its reference trainer did.
import type { ArborEvents, EventBus } from "../broker/event-bus.js";
import type { WeightSync } from "./trainer-port.js";

/**
 * `sync`, then a `policy-version` event on `bus` once it resolved (nothing when it failed: the engines
 * do not serve that version).
 */
export function announcedWeightSync(sync: WeightSync, bus: EventBus<Pick<ArborEvents, "policy-version">>): WeightSync {
  return {
    async load(modelPath, version) {
      await sync.load(modelPath, version);
      await bus.publish("policy-version", { version, checkpoint: modelPath }, `weights:${version}:${modelPath}`);
    },
  };
}
