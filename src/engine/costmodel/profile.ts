// Cost profiles: the constants the cost model turns a step plan into a duration with, one profile per
// (model, GPU, parallelism). Every constant is either a cited figure or derived in code from cited
// figures, so a reader can check each number and a new profile can be derived the same way.
import { ArborError } from "../../core/errors.js";

/** The constants of one (model, GPU) pair. Times are in ms, sizes in bytes, bandwidths in bytes/ms. */
export interface CostProfile {
  /** Registry name, e.g. "llama-3-8b/h100". */
  name: string;
  model: string;
  gpu: string;
  /** GPUs the engine spans (tensor parallel degree); per-GPU constants below already divide by it. */
  tensorParallel: number;
  /** Fixed cost of a step that contains prefill tokens. */
  prefillBaseMs: number;
  /** Cost per prefill token beyond the MLP (attention projections, lm_head, norms, ...). */
  prefillPerTokenMs: number;
  /** Fixed cost of a step that contains decoding sequences. A mixed step pays max(prefill, decode) base. */
  decodeBaseMs: number;
  /** Cost per decoding sequence beyond the MLP (its non-MLP GEMMs and sampling). */
  decodePerSeqMs: number;
  /** Attention cost per KV token read (decode context, or the cached prefix of a prefill chunk). */
  attnPerKvTokenMs: number;
  /** MLP cost while memory bound: streaming the MLP weights once per step. */
  mlpMemoryBoundMs: number;
  /** MLP cost per batched token past the threshold (compute bound). */
  mlpComputeBoundPerTokenMs: number;
  /** Batched tokens per step up to which the MLP stays memory bound. */
  computeBoundThresholdTokens: number;
  /** KV cache bytes per token for the whole engine (all TP ranks together). */
  kvBytesPerToken: number;
  /** Tokens of KV that fit in device memory (L1) after the weights. */
  hbmKvCapacityTokens: number;
  /** Tokens per KV block. */
  blockSize: number;
  /** L1 <-> L2 (device <-> host memory) bandwidth of the engine. */
  l2BandwidthBytesPerMs: number;
  /** Bandwidth to and from L3 (the global pool over RDMA) of the engine. */
  l3BandwidthBytesPerMs: number;
}

// ---------------------------------------------------------------------------------------------
// Hardware figures (bytes/ms = GB/s × 1e6; FLOP/ms = TFLOP/s × 1e9).
// NVIDIA H100 Tensor Core GPU datasheet, SXM: 80 GB HBM3, 3.35 TB/s, BF16 1,979 TFLOPS with sparsity
// (989 dense).
const H100_HBM_BYTES = 80e9;
const H100_HBM_BYTES_PER_MS = 3.35e9;
// NVIDIA H200 Tensor Core GPU datasheet, SXM: 141 GB HBM3e, 4.8 TB/s; same Hopper tensor cores as
// H100 (BF16 1,979 TFLOPS with sparsity), so the achieved GEMM rate below carries over unchanged.
const H200_HBM_BYTES = 141e9;
const H200_HBM_BYTES_PER_MS = 4.8e9;
// PCIe Gen5 x16: 64 GB/s per direction (32 GT/s × 16 lanes, 128b/130b); one link per GPU.
const PCIE5_X16_BYTES_PER_MS = 64e6;
// Mooncake Transfer Engine README (kvcache-ai/Mooncake): "up to 87 GB/s and 190 GB/s of bandwidth in
// 4×200 Gbps and 8×400 Gbps RoCE networks" for a 40 GB KV transfer. An 8-GPU node has one 400 Gbps
// NIC per GPU, so one GPU's share of the 190 GB/s is 190 / 8 = 23.75 GB/s.
const MOONCAKE_PER_GPU_BYTES_PER_MS = 190e6 / 8;
// vLLM defaults: gpu_memory_utilization = 0.9, block_size = 16 (vLLM engine arguments docs).
const VLLM_GPU_MEMORY_UTILIZATION = 0.9;
const VLLM_BLOCK_SIZE = 16;
const BF16_BYTES = 2;

// ---------------------------------------------------------------------------------------------
// Model shapes (Hugging Face config.json of each model).
interface ModelShape {
  params: number;
  layers: number;
  hidden: number;
  intermediate: number;
  kvHeads: number;
  headDim: number;
  vocab: number;
}
// meta-llama/Meta-Llama-3-8B: 32 layers, hidden 4096, intermediate 14336, 8 KV heads × 128, vocab
// 128256, 8.03 B parameters (untied lm_head).
const LLAMA3_8B: ModelShape = {
  params: 8.03e9,
  layers: 32,
  hidden: 4096,
  intermediate: 14336,
  kvHeads: 8,
  headDim: 128,
  vocab: 128256,
};
// meta-llama/Meta-Llama-3-70B: 80 layers, hidden 8192, intermediate 28672, 8 KV heads × 128, vocab
// 128256, 70.55 B parameters.
const LLAMA3_70B: ModelShape = {
  params: 70.55e9,
  layers: 80,
  hidden: 8192,
  intermediate: 28672,
  kvHeads: 8,
  headDim: 128,
  vocab: 128256,
};
// docs/references.md §F quotes its MLP figures for "a 7B model"; we take the canonical 7B shape
// (meta-llama/Llama-2-7b: 32 layers, hidden 4096, intermediate 11008) to turn them into rates.
const LLAMA2_7B_MLP_PARAMS = 3 * 4096 * 11008 * 32;

/** Gate, up and down projections of every layer. */
function mlpParams(m: ModelShape): number {
  return 3 * m.hidden * m.intermediate * m.layers;
}
/** GEMM weights outside the MLP: attention projections and lm_head (the embedding lookup is not a GEMM). */
function nonMlpGemmParams(m: ModelShape): number {
  return m.params - mlpParams(m) - m.vocab * m.hidden;
}
/** K and V, every layer, BF16. */
function kvBytesPerToken(m: ModelShape): number {
  return 2 * m.layers * m.kvHeads * m.headDim * BF16_BYTES;
}

// ---------------------------------------------------------------------------------------------
// docs/references.md §F reference numbers (H100, 8B, batch 1): prefill ≈ 30 ms + 0.25 ms/token, decode ≈
// 12 ms per step; a 7B model's MLP ≈ 5.6 ms per decode step up to ~128 tokens per batch, then ≈ 20 µs
// per token; KV ≈ 128 KiB per token for Llama-3-8B.
export const SECTION_F = {
  prefillBaseMs: 30,
  prefillPerTokenMs: 0.25,
  decodeStepMs: 12,
  mlpFloorMs: 5.6,
  mlpThresholdTokens: 128,
  mlpPerTokenMs: 0.02,
  kvBytesPerToken: 128 * 1024,
} as const;

// Derived rates. The §F 7B MLP figures on H100 imply:
// - an achieved GEMM rate of 2 FLOP × 7B-MLP params / 20 µs = 2 × 4.33e9 / 0.02 = 433 TFLOP/s
//   (44% of the 989 TFLOP/s dense BF16 peak);
// - an achieved HBM fraction of (7B MLP bytes / 3.35 TB/s) / 5.6 ms = 2.58 ms / 5.6 ms = 0.46.
const GEMM_FLOPS_PER_MS = (2 * LLAMA2_7B_MLP_PARAMS) / SECTION_F.mlpPerTokenMs;
const HBM_ACHIEVED_FRACTION =
  (LLAMA2_7B_MLP_PARAMS * BF16_BYTES) / H100_HBM_BYTES_PER_MS / SECTION_F.mlpFloorMs;

/** KV tokens that fit after the weights, at vLLM's default memory utilization. */
function kvCapacityTokens(m: ModelShape, tp: number, hbmBytesPerGpu: number): number {
  const free = VLLM_GPU_MEMORY_UTILIZATION * hbmBytesPerGpu * tp - m.params * BF16_BYTES;
  return Math.floor(free / kvBytesPerToken(m));
}

// ---------------------------------------------------------------------------------------------
// llama-3-8b/h100 (TP=1): calibrated to §F.
const LLAMA3_8B_PER_SEQ_MS = (2 * nonMlpGemmParams(LLAMA3_8B)) / GEMM_FLOPS_PER_MS;

/** Llama-3-8B on one H100 SXM, BF16, calibrated to docs/references.md §F. */
export const LLAMA3_8B_H100: CostProfile = {
  name: "llama-3-8b/h100",
  model: "meta-llama/Meta-Llama-3-8B (BF16)",
  gpu: "1× H100 SXM 80 GB",
  tensorParallel: 1,
  // §F's MLP figures, used as given (they are quoted for a 7B; Llama-3-8B's MLP is 1.3× wider, but
  // the 12 ms batch-1 step we calibrate to already contains its real MLP).
  mlpMemoryBoundMs: SECTION_F.mlpFloorMs,
  mlpComputeBoundPerTokenMs: SECTION_F.mlpPerTokenMs,
  computeBoundThresholdTokens: SECTION_F.mlpThresholdTokens,
  // §F prefill = 30 + 0.25·N. The roofline already charges the MLP (5.6 + 0.02·(N − 128) for N ≥ 128),
  // so per token 0.25 − 0.02 = 0.23 ms, and base 30 − (5.6 − 128 × 0.02) = 26.96 ms: the sum is
  // exactly §F for N ≥ 128 and at most 2.56 ms above it below.
  prefillPerTokenMs: SECTION_F.prefillPerTokenMs - SECTION_F.mlpPerTokenMs,
  prefillBaseMs:
    SECTION_F.prefillBaseMs -
    (SECTION_F.mlpFloorMs - SECTION_F.mlpThresholdTokens * SECTION_F.mlpPerTokenMs),
  // Per sequence: its non-MLP GEMMs (1.87 B params: attention projections + lm_head) at the achieved
  // GEMM rate: 2 × 1.87e9 / 433e9 FLOP/ms = 8.6 µs.
  decodePerSeqMs: LLAMA3_8B_PER_SEQ_MS,
  // §F batch-1 step = 12 ms = base + one sequence + MLP floor (context unstated, so no attention):
  // base = 12 − 5.6 − 0.0086 = 6.39 ms.
  decodeBaseMs: SECTION_F.decodeStepMs - SECTION_F.mlpFloorMs - LLAMA3_8B_PER_SEQ_MS,
  // Decode attention streams each KV token once: 131072 B / 3.35e9 B/ms = 39 ns per KV token.
  attnPerKvTokenMs: kvBytesPerToken(LLAMA3_8B) / H100_HBM_BYTES_PER_MS,
  // 2 (K,V) × 32 layers × 8 heads × 128 × 2 B = 131072 B = 128 KiB, as §F says.
  kvBytesPerToken: kvBytesPerToken(LLAMA3_8B),
  // (0.9 × 80 GB − 16.06 GB of weights) / 131072 B = 426,788 tokens (activation workspace ignored).
  hbmKvCapacityTokens: kvCapacityTokens(LLAMA3_8B, 1, H100_HBM_BYTES),
  blockSize: VLLM_BLOCK_SIZE,
  l2BandwidthBytesPerMs: PCIE5_X16_BYTES_PER_MS,
  l3BandwidthBytesPerMs: MOONCAKE_PER_GPU_BYTES_PER_MS,
};

// ---------------------------------------------------------------------------------------------
// llama-3-70b/h200-tp4: derived from the model shape, the H200 datasheet and the §F rates, then
// checked (not fitted) against vLLM's published H200 latency benchmark (see calibration.ts).
const TP4 = 4;
const H200_ACHIEVED_BYTES_PER_MS = HBM_ACHIEVED_FRACTION * H200_HBM_BYTES_PER_MS;
const LLAMA3_70B_NON_MLP_FLOPS_PER_GPU = (2 * nonMlpGemmParams(LLAMA3_70B)) / TP4;
const LLAMA3_70B_NON_MLP_BYTES_PER_GPU = (nonMlpGemmParams(LLAMA3_70B) * BF16_BYTES) / TP4;

/** Llama-3-70B on four H200 SXM with tensor parallelism 4, BF16, derived from §F rates and datasheets. */
export const LLAMA3_70B_H200_TP4: CostProfile = {
  name: "llama-3-70b/h200-tp4",
  model: "meta-llama/Meta-Llama-3-70B (BF16)",
  gpu: "4× H200 SXM 141 GB, TP=4",
  tensorParallel: TP4,
  // MLP weights per GPU: 3 × 8192 × 28672 × 80 × 2 B / 4 = 28.2 GB, streamed at §F's achieved
  // fraction (0.46) of 4.8 TB/s = 2.22e9 B/ms → 12.7 ms.
  mlpMemoryBoundMs: (mlpParams(LLAMA3_70B) * BF16_BYTES) / TP4 / H200_ACHIEVED_BYTES_PER_MS,
  // 2 × 56.4e9 / 4 = 28.2 GFLOP per GPU per token at the achieved 433 TFLOP/s → 65 µs per token.
  mlpComputeBoundPerTokenMs: (2 * mlpParams(LLAMA3_70B)) / TP4 / GEMM_FLOPS_PER_MS,
  // The ridge point (FLOP per byte) scales as peak FLOP/s ÷ bandwidth: same tensor cores, 4.8 vs
  // 3.35 TB/s, so §F's 128 tokens becomes 128 × 3.35 / 4.8 = 89 tokens.
  computeBoundThresholdTokens: Math.round(
    (SECTION_F.mlpThresholdTokens * H100_HBM_BYTES_PER_MS) / H200_HBM_BYTES_PER_MS,
  ),
  // Non-MLP GEMMs per GPU: 2 × 13.1e9 / 4 = 6.57 GFLOP per token at 433 TFLOP/s → 15 µs.
  prefillPerTokenMs: LLAMA3_70B_NON_MLP_FLOPS_PER_GPU / GEMM_FLOPS_PER_MS,
  decodePerSeqMs: LLAMA3_70B_NON_MLP_FLOPS_PER_GPU / GEMM_FLOPS_PER_MS,
  // Fixed cost of any forward pass: streaming the non-MLP weights (13.1e9 × 2 B / 4 = 6.57 GB per GPU)
  // at 2.22e9 B/ms → 2.96 ms. No §F-style prefill overhead is known for this setup, so prefill pays
  // the same base.
  decodeBaseMs: LLAMA3_70B_NON_MLP_BYTES_PER_GPU / H200_ACHIEVED_BYTES_PER_MS,
  prefillBaseMs: LLAMA3_70B_NON_MLP_BYTES_PER_GPU / H200_ACHIEVED_BYTES_PER_MS,
  // Each GPU holds 2 of the 8 KV heads: 327680 B / 4 per token at 4.8e9 B/ms → 17 ns per KV token.
  attnPerKvTokenMs: kvBytesPerToken(LLAMA3_70B) / TP4 / H200_HBM_BYTES_PER_MS,
  // 2 × 80 × 8 × 128 × 2 B = 327680 B = 320 KiB (Mooncake's README: 128k tokens of Llama3-70B ≈ 40 GB).
  kvBytesPerToken: kvBytesPerToken(LLAMA3_70B),
  // (0.9 × 4 × 141 GB − 141.1 GB of weights) / 327680 B = 1,118,469 tokens.
  hbmKvCapacityTokens: kvCapacityTokens(LLAMA3_70B, TP4, H200_HBM_BYTES),
  blockSize: VLLM_BLOCK_SIZE,
  // Four GPUs, four PCIe Gen5 x16 links and four 400 Gbps NICs, used in parallel by the TP shards.
  l2BandwidthBytesPerMs: TP4 * PCIE5_X16_BYTES_PER_MS,
  l3BandwidthBytesPerMs: TP4 * MOONCAKE_PER_GPU_BYTES_PER_MS,
};

/** Shipped profiles by name. */
export const COST_PROFILES: Readonly<Record<string, CostProfile>> = {
  [LLAMA3_8B_H100.name]: LLAMA3_8B_H100,
  [LLAMA3_70B_H200_TP4.name]: LLAMA3_70B_H200_TP4,
};

/** A shipped profile by name; the error lists the known names. */
export function getCostProfile(name: string): CostProfile {
  const p = COST_PROFILES[name];
  if (!p) {
    throw new ArborError(
      `unknown cost profile "${name}" (known: ${Object.keys(COST_PROFILES).join(", ")})`,
      "config",
    );
  }
  return p;
}

const NON_NEGATIVE: (keyof CostProfile)[] = [
  "prefillBaseMs",
  "prefillPerTokenMs",
  "decodeBaseMs",
  "decodePerSeqMs",
  "attnPerKvTokenMs",
  "mlpMemoryBoundMs",
  "mlpComputeBoundPerTokenMs",
  "computeBoundThresholdTokens",
];
const POSITIVE: (keyof CostProfile)[] = [
  "tensorParallel",
  "kvBytesPerToken",
  "hbmKvCapacityTokens",
  "blockSize",
  "l2BandwidthBytesPerMs",
  "l3BandwidthBytesPerMs",
];

/** Checks a (possibly user-supplied) profile; throws naming the first bad field. Returns it unchanged. */
export function validateCostProfile(p: CostProfile): CostProfile {
  for (const k of NON_NEGATIVE) {
    const v = p[k];
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
      throw new ArborError(`cost profile ${p.name}: ${k} must be a finite number >= 0 (got ${String(v)})`, "config");
    }
  }
  for (const k of POSITIVE) {
    const v = p[k];
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) {
      throw new ArborError(`cost profile ${p.name}: ${k} must be a finite number > 0 (got ${String(v)})`, "config");
    }
  }
  for (const k of ["tensorParallel", "blockSize", "hbmKvCapacityTokens"] as const) {
    if (!Number.isInteger(p[k])) {
      throw new ArborError(`cost profile ${p.name}: ${k} must be an integer (got ${p[k]})`, "config");
    }
  }
  return p;
}
