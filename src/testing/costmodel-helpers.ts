// Test fixtures for the cost model: a profile with round numbers for hand-worked cases.
import type { CostProfile } from "../engine/costmodel/profile.js";

/** Round-number profile whose step times are easy to work out by hand. */
export const ROUND_PROFILE: CostProfile = {
  name: "test/round",
  model: "test",
  gpu: "test",
  tensorParallel: 1,
  prefillBaseMs: 10,
  prefillPerTokenMs: 1,
  decodeBaseMs: 4,
  decodePerSeqMs: 0.5,
  attnPerKvTokenMs: 0.01,
  mlpMemoryBoundMs: 2,
  mlpComputeBoundPerTokenMs: 0.1,
  computeBoundThresholdTokens: 4,
  kvBytesPerToken: 100,
  hbmKvCapacityTokens: 1000,
  blockSize: 4,
  l2BandwidthBytesPerMs: 1000,
  l3BandwidthBytesPerMs: 100,
};
