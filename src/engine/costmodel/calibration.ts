// Calibration table: the cost model's predictions beside the published reference points its profiles
// were calibrated from or checked against, with the error of each. `arbor bench engine` prints it
// (src/bench/costmodel-calibration.ts).
import type { ScheduledChunk, StepPlan } from "../scheduler/step-plan.js";
import { LLAMA3_70B_H200_TP4, LLAMA3_8B_H100, SECTION_F, type CostProfile } from "./profile.js";
import { mlpTimeMs, stepTimeMs } from "./step-time.js";

export interface CalibrationRow {
  case: string;
  unit: "ms" | "tok/s";
  /** Published value and where it comes from; absent for model-only rows (the curve itself). */
  reference?: { value: number; source: string };
  model: number;
  /** 100 × (model − reference) / reference; absent without a reference. */
  errorPct?: number;
}

interface RefPoint {
  case: string;
  unit: "ms" | "tok/s";
  value: number;
  source: string;
  measure: (p: CostProfile) => number;
}

/** A step of `batch` fresh prompts of `promptLen` tokens, each chunk ending its prompt. */
export function prefillPlan(batch: number, promptLen: number): StepPlan {
  const chunks: ScheduledChunk[] = [];
  for (let i = 0; i < batch; i++) {
    chunks.push({ requestId: `r${i}`, numNewTokens: promptLen, numComputedTokens: 0, samples: true });
  }
  return { stepId: 0, now: 0, chunks, numBatchedTokens: batch * promptLen, preempted: [], finished: [], transfers: [] };
}

/** A step decoding `batch` sequences whose attention reads `kvLen` tokens each (the new one included). */
export function decodePlan(batch: number, kvLen: number): StepPlan {
  const chunks: ScheduledChunk[] = [];
  for (let i = 0; i < batch; i++) {
    chunks.push({ requestId: `r${i}`, numNewTokens: 1, numComputedTokens: kvLen - 1, samples: true });
  }
  return { stepId: 0, now: 0, chunks, numBatchedTokens: batch, preempted: [], finished: [], transfers: [] };
}

function prefillMs(p: CostProfile, batch: number, promptLen: number): number {
  return stepTimeMs(p, prefillPlan(batch, promptLen));
}

function decodeMs(p: CostProfile, batch: number, kvLen: number): number {
  return stepTimeMs(p, decodePlan(batch, kvLen));
}

/** End-to-end time of `batch` requests of `input` prompt and `output` generated tokens run together. */
export function batchLatencyMs(p: CostProfile, batch: number, input: number, output: number): number {
  let t = prefillMs(p, batch, input); // samples the first token
  for (let k = 1; k < output; k++) t += decodeMs(p, batch, input + k);
  return t;
}

const F = "docs/references.md §F";
const fPrefill = (n: number): number => SECTION_F.prefillBaseMs + SECTION_F.prefillPerTokenMs * n;
const fMlp = (b: number): number =>
  SECTION_F.mlpFloorMs + SECTION_F.mlpPerTokenMs * Math.max(0, b - SECTION_F.mlpThresholdTokens);

const LLAMA3_8B_POINTS: RefPoint[] = [
  ...[32, 128, 512, 2048, 8192].map((n) => ({
    case: `prefill step, batch 1, prompt ${n}`,
    unit: "ms" as const,
    value: fPrefill(n),
    source: `${F}: 30 ms + 0.25 ms/token`,
    measure: (p: CostProfile) => prefillMs(p, 1, n),
  })),
  {
    case: "decode step, batch 1, KV 512",
    unit: "ms",
    value: SECTION_F.decodeStepMs,
    source: `${F}: ≈ 12 ms per step`,
    measure: (p) => decodeMs(p, 1, 512),
  },
  ...[8, 32, 128, 256].map((b) => ({
    case: `MLP part of a decode step, batch ${b}`,
    unit: "ms" as const,
    value: fMlp(b),
    source: `${F}: 5.6 ms up to 128 tokens, then 20 µs/token`,
    measure: (p: CostProfile) => mlpTimeMs(p, b),
  })),
  {
    case: "decode throughput, batch 1, KV 512",
    unit: "tok/s",
    value: 1000 / SECTION_F.decodeStepMs,
    source: `${F}: 1000 / 12 ms`,
    measure: (p) => 1000 / decodeMs(p, 1, 512),
  },
  ...[128, 2048].map((n) => ({
    case: `prefill throughput, batch 1, prompt ${n}`,
    unit: "tok/s" as const,
    value: (1000 * n) / fPrefill(n),
    source: `${F}: n / (30 + 0.25 n) ms`,
    measure: (p: CostProfile) => (1000 * n) / prefillMs(p, 1, n),
  })),
];

// vLLM performance benchmark on H200 (buildkite vllm/performance-benchmark build 9513, "Latency
// tests": input 32, output 128, batch 8): latency_llama70B_tp4 mean 2075.08 ms.
const VLLM_H200 = "vLLM perf benchmark, H200, latency_llama70B_tp4 (buildkite build 9513)";
// NVIDIA NIM LLM benchmarking, Performance page: Llama-3.3-70b-instruct 1.8.0, 2× H100 80G fp8 TP2,
// 5000 input tokens, concurrency 1: TTFT 406.77 ms. A cross-check on another setup with the same
// aggregate dense tensor peak (2 × 1979 FP8 = 4 × 989 BF16 TFLOP/s), not a point we fitted.
const NIM_70B = "NVIDIA NIM benchmarks: Llama-3.3-70B fp8 TP2 on 2×H100, ISL 5000, concurrency 1 (cross-check)";

const LLAMA3_70B_POINTS: RefPoint[] = [
  {
    case: "batch 8, 32 in / 128 out, end to end",
    unit: "ms",
    value: 2075.08,
    source: VLLM_H200,
    measure: (p) => batchLatencyMs(p, 8, 32, 128),
  },
  {
    case: "output throughput, batch 8, 32 in / 128 out",
    unit: "tok/s",
    value: (8 * 128 * 1000) / 2075.08,
    source: `${VLLM_H200}: 8 × 128 / 2075.08 ms`,
    measure: (p) => (8 * 128 * 1000) / batchLatencyMs(p, 8, 32, 128),
  },
  {
    case: "prefill step, batch 1, prompt 5000 (TTFT)",
    unit: "ms",
    value: 406.77,
    source: NIM_70B,
    measure: (p) => prefillMs(p, 1, 5000),
  },
];

const POINTS: Record<string, RefPoint[]> = {
  [LLAMA3_8B_H100.name]: LLAMA3_8B_POINTS,
  [LLAMA3_70B_H200_TP4.name]: LLAMA3_70B_POINTS,
};

/**
 * Profiles checked against published measurements. The Seer workloads' profiles (Moonlight, Qwen2-VL-72B,
 * Kimi-K2 on H800) are derived from configs and datasheets only: no published latency of them on H800 is cited
 * yet, so their step times are unchecked and `arbor sim` reports on them carry that caveat.
 */
export const CALIBRATED_PROFILES: readonly string[] = Object.keys(POINTS);

/** The model's own curve: decode step time and throughput vs batch size, prefill vs prompt length. */
function curveRows(p: CostProfile): CalibrationRow[] {
  const rows: CalibrationRow[] = [];
  for (const b of [1, 8, 32, 128, 256]) {
    const ms = decodeMs(p, b, 1024);
    rows.push({ case: `decode step, batch ${b}, KV 1024 each`, unit: "ms", model: ms });
    rows.push({ case: `decode throughput, batch ${b}, KV 1024 each`, unit: "tok/s", model: (1000 * b) / ms });
  }
  for (const [b, n] of [
    [1, 512],
    [1, 4096],
    [4, 1024],
    [8, 2048],
  ] as const) {
    rows.push({ case: `prefill throughput, batch ${b}, prompt ${n}`, unit: "tok/s", model: (1000 * b * n) / prefillMs(p, b, n) });
  }
  return rows;
}

/**
 * Rows comparing `profile`'s predictions with the published points it was calibrated from (a profile
 * without known points gets none), followed by model-only rows tracing its throughput curve.
 */
export function calibrationTable(profile: CostProfile): CalibrationRow[] {
  const refRows = (POINTS[profile.name] ?? []).map((r): CalibrationRow => {
    const model = r.measure(profile);
    return {
      case: r.case,
      unit: r.unit,
      reference: { value: r.value, source: r.source },
      model,
      errorPct: (100 * (model - r.value)) / r.value,
    };
  });
  return [...refRows, ...curveRows(profile)];
}
