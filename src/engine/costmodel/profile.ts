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

// ---------------------------------------------------------------------------------------------
// The models of Seer's Table 3 (arXiv 2511.14617), on the H800s Seer ran them on. NVIDIA H800 SXM: 80 GB
// HBM3 at 3.35 TB/s and the H100's tensor cores (989 TFLOPS dense BF16, 1,979 dense FP8); only NVLink is
// cut (400 GB/s), and tensor-parallel communication is not modelled by any profile. So an H800 takes the
// H100 figures above.
const H800_HBM_BYTES = H100_HBM_BYTES;
const H800_HBM_BYTES_PER_MS = H100_HBM_BYTES_PER_MS;
/** Hopper FP8 dense peak is twice BF16's (H100 datasheet: 3,958 vs 1,979 TFLOPS with sparsity). */
const FP8_GEMM_SPEEDUP = 2;

/** A DeepSeek-V3-style MoE with multi-head latent attention (MLA), from its Hugging Face config.json. */
interface MlaMoeShape {
  layers: number;
  /** Leading dense layers (first_k_dense_replace) and their intermediate_size. */
  denseLayers: number;
  hidden: number;
  denseIntermediate: number;
  moeIntermediate: number;
  routedExperts: number;
  sharedExperts: number;
  expertsPerToken: number;
  heads: number;
  /** q_lora_rank (0: queries projected directly from the hidden state). */
  qLoraRank: number;
  kvLoraRank: number;
  qkNopeHeadDim: number;
  qkRopeHeadDim: number;
  vHeadDim: number;
  vocab: number;
  /** Bytes per weight as served (BF16 2, FP8 1). */
  weightBytes: number;
}
// moonshotai/Moonlight-16B-A3B config.json: 27 layers (first 1 dense, intermediate 11264), hidden 2048,
// 64 routed experts + 2 shared of moe_intermediate 1408, 6 per token, 16 heads, no q_lora, kv_lora_rank 512,
// qk_nope 128, qk_rope 64, v_head 128, vocab 163840; served in BF16.
const MOONLIGHT_16B_A3B: MlaMoeShape = {
  layers: 27,
  denseLayers: 1,
  hidden: 2048,
  denseIntermediate: 11264,
  moeIntermediate: 1408,
  routedExperts: 64,
  sharedExperts: 2,
  expertsPerToken: 6,
  heads: 16,
  qLoraRank: 0,
  kvLoraRank: 512,
  qkNopeHeadDim: 128,
  qkRopeHeadDim: 64,
  vHeadDim: 128,
  vocab: 163840,
  weightBytes: BF16_BYTES,
};
// moonshotai/Kimi-K2-Instruct config.json: 61 layers (first 1 dense, intermediate 18432), hidden 7168, 384
// routed experts + 1 shared of moe_intermediate 2048, 8 per token, 64 heads, q_lora_rank 1536, kv_lora_rank
// 512, qk_nope 128, qk_rope 64, v_head 128, vocab 163840; released and served in FP8 (block-quantized).
const KIMI_K2: MlaMoeShape = {
  layers: 61,
  denseLayers: 1,
  hidden: 7168,
  denseIntermediate: 18432,
  moeIntermediate: 2048,
  routedExperts: 384,
  sharedExperts: 1,
  expertsPerToken: 8,
  heads: 64,
  qLoraRank: 1536,
  kvLoraRank: 512,
  qkNopeHeadDim: 128,
  qkRopeHeadDim: 64,
  vHeadDim: 128,
  vocab: 163840,
  weightBytes: 1,
};

/** MLP weights: the dense layers' and every expert's (routed and shared) gate, up and down projections. */
function moeMlpParams(m: MlaMoeShape): { all: number; active: number } {
  const moeLayers = m.layers - m.denseLayers;
  const dense = 3 * m.hidden * m.denseIntermediate * m.denseLayers;
  const expert = 3 * m.hidden * m.moeIntermediate;
  return {
    all: dense + expert * (m.routedExperts + m.sharedExperts) * moeLayers,
    active: dense + expert * (m.expertsPerToken + m.sharedExperts) * moeLayers,
  };
}
/** MLA projections of every layer (q or q_a/q_b, kv_a with the rope key, kv_b, o) plus lm_head. */
function mlaNonMlpGemmParams(m: MlaMoeShape): number {
  const qk = m.qkNopeHeadDim + m.qkRopeHeadDim;
  const q = m.qLoraRank > 0 ? m.hidden * m.qLoraRank + m.qLoraRank * m.heads * qk : m.hidden * m.heads * qk;
  const kvA = m.hidden * (m.kvLoraRank + m.qkRopeHeadDim);
  const kvB = m.kvLoraRank * m.heads * (m.qkNopeHeadDim + m.vHeadDim);
  const o = m.heads * m.vHeadDim * m.hidden;
  return (q + kvA + kvB + o) * m.layers + m.vocab * m.hidden;
}
/** Every weight: MLP, attention, lm_head and the embedding. */
function mlaMoeParams(m: MlaMoeShape): number {
  return moeMlpParams(m).all + mlaNonMlpGemmParams(m) + m.vocab * m.hidden;
}
/** MLA caches one compressed latent (kv_lora_rank) and the rope key per layer, BF16. */
function mlaKvBytesPerToken(m: MlaMoeShape): number {
  return m.layers * (m.kvLoraRank + m.qkRopeHeadDim) * BF16_BYTES;
}

/**
 * A cost profile for an MLA MoE on `tp` H800s, derived the way llama-3-70b/h200-tp4's is:
 * - memory bound MLP floor: every expert's weights streamed once per step (with a rollout's batches of 64+
 *   sequences and k of E experts per token, an expert is left untouched with probability (1 − k/E)^B: for
 *   Moonlight (1 − 6/64)^64 = 0.2%, so all of them are read) at §F's achieved HBM fraction;
 * - compute: 2 FLOP per active MLP weight per token at §F's achieved GEMM rate (×2 for FP8 weights); the
 *   roofline's ridge (floor ÷ per-token cost) is where the MLP turns compute bound;
 * - base: the attention projections and lm_head streamed once per step; per token, their FLOPs;
 * - attention: with tensor parallelism (`dpAttention` false) vLLM's MLA keeps the whole latent on every rank
 *   (the latent is not split by head), so each rank reads mlaKvBytes per KV token and the engine's KV capacity
 *   is one rank's free memory; with data-parallel attention and expert parallelism (`dpAttention`, vLLM's
 *   DP+EP), each rank holds its own sequences' latents: capacity is the sum of the ranks', and a KV token is
 *   read by one rank (the ranks' reads run in parallel, so the engine pays 1/tp of it per token).
 */
function mlaMoeProfile(name: string, model: string, m: MlaMoeShape, tp: number, dpAttention = false): CostProfile {
  const mlp = moeMlpParams(m);
  const nonMlp = mlaNonMlpGemmParams(m);
  const gemm = GEMM_FLOPS_PER_MS * (m.weightBytes === 1 ? FP8_GEMM_SPEEDUP : 1);
  const achievedBw = HBM_ACHIEVED_FRACTION * H800_HBM_BYTES_PER_MS;
  const floorMs = (mlp.all * m.weightBytes) / tp / achievedBw;
  const perTokenMs = (2 * mlp.active) / tp / gemm;
  const kvPerRank = mlaKvBytesPerToken(m);
  const free = VLLM_GPU_MEMORY_UTILIZATION * H800_HBM_BYTES - (mlaMoeParams(m) * m.weightBytes) / tp;
  if (free <= 0) throw new ArborError(`cost profile ${name}: the weights do not fit on ${tp} H800s`, "config");
  const baseMs = (nonMlp * m.weightBytes) / tp / achievedBw;
  return {
    name,
    model,
    gpu: `${tp}× H800 SXM 80 GB${tp === 1 ? "" : dpAttention ? `, DP=${tp} attention + EP=${tp}` : `, TP=${tp}`}`,
    tensorParallel: tp,
    mlpMemoryBoundMs: floorMs,
    mlpComputeBoundPerTokenMs: perTokenMs,
    computeBoundThresholdTokens: Math.round(floorMs / perTokenMs),
    prefillPerTokenMs: (2 * nonMlp) / tp / gemm,
    decodePerSeqMs: (2 * nonMlp) / tp / gemm,
    prefillBaseMs: baseMs,
    decodeBaseMs: baseMs,
    attnPerKvTokenMs: kvPerRank / H800_HBM_BYTES_PER_MS / (dpAttention ? tp : 1),
    kvBytesPerToken: kvPerRank * (dpAttention ? 1 : tp),
    hbmKvCapacityTokens: Math.floor((free * (dpAttention ? tp : 1)) / kvPerRank),
    blockSize: VLLM_BLOCK_SIZE,
    l2BandwidthBytesPerMs: tp * PCIE5_X16_BYTES_PER_MS,
    l3BandwidthBytesPerMs: tp * MOONCAKE_PER_GPU_BYTES_PER_MS,
  };
}

/**
 * Moonlight-16B-A3B on one H800 (BF16): 15.9 B weights (31.9 GB), 2.9 B active per token; MLA KV 27 × 576 × 2 B
 * = 31,104 B per token; (0.9 × 80 − 31.9) GB / 31,104 B ≈ 1.29 M KV tokens.
 */
export const MOONLIGHT_16B_A3B_H800: CostProfile = mlaMoeProfile("moonlight-16b-a3b/h800", "moonshotai/Moonlight-16B-A3B (BF16)", MOONLIGHT_16B_A3B, 1);

/**
 * Kimi-K2 (1.04 T weights, 32 B active, FP8) on 16 H800s with data-parallel attention and expert parallelism
 * (DP16+EP), the smallest H800 deployment of vLLM's Kimi-K2 recipe (16 GPUs); MLA KV 61 × 576 × 2 B = 70,272 B
 * per token; (0.9 × 80 − 65.0) GB free per rank × 16 / 70,272 B ≈ 1.79 M KV tokens. With TP=16 instead the
 * latent is replicated and an instance would hold 112 k tokens, about one max-length (98,304) request.
 */
export const KIMI_K2_H800_DP16: CostProfile = mlaMoeProfile("kimi-k2/h800-dp16-ep16", "moonshotai/Kimi-K2-Instruct (FP8)", KIMI_K2, 16, true);

// Qwen/Qwen2-VL-72B-Instruct config.json (language model): 80 layers, hidden 8192, intermediate 29568, 64
// heads with 8 KV heads × 128, vocab 152064, untied lm_head: 72.7 B weights (the 0.7 B vision encoder's
// cost is not modelled: image tokens count as prompt tokens).
const QWEN2_VL_72B: ModelShape = {
  params: 3 * 8192 * 29568 * 80 + (2 * 8192 * 8192 + 2 * 8192 * 1024) * 80 + 2 * 152064 * 8192,
  layers: 80,
  hidden: 8192,
  intermediate: 29568,
  kvHeads: 8,
  headDim: 128,
  vocab: 152064,
};
const TP8 = 8;
const H800_ACHIEVED_BYTES_PER_MS = HBM_ACHIEVED_FRACTION * H800_HBM_BYTES_PER_MS;

/**
 * Qwen2-VL-72B on eight H800s (one node) with TP=8, BF16, derived exactly as llama-3-70b/h200-tp4 (dense GQA):
 * MLP floor 58.1e9 × 2 B / 8 at 0.46 × 3.35 TB/s; KV 2 × 80 × 8 × 128 × 2 B = 327,680 B per token split over the
 * ranks; (0.9 × 8 × 80 GB − 145.4 GB) / 327,680 B ≈ 1.31 M tokens.
 */
export const QWEN2_VL_72B_H800_TP8: CostProfile = {
  name: "qwen2-vl-72b/h800-tp8",
  model: "Qwen/Qwen2-VL-72B-Instruct (BF16)",
  gpu: "8× H800 SXM 80 GB, TP=8",
  tensorParallel: TP8,
  mlpMemoryBoundMs: (mlpParams(QWEN2_VL_72B) * BF16_BYTES) / TP8 / H800_ACHIEVED_BYTES_PER_MS,
  mlpComputeBoundPerTokenMs: (2 * mlpParams(QWEN2_VL_72B)) / TP8 / GEMM_FLOPS_PER_MS,
  // Same tensor cores and bandwidth as the H100 §F is measured on: §F's 128-token ridge holds.
  computeBoundThresholdTokens: SECTION_F.mlpThresholdTokens,
  prefillPerTokenMs: (2 * nonMlpGemmParams(QWEN2_VL_72B)) / TP8 / GEMM_FLOPS_PER_MS,
  decodePerSeqMs: (2 * nonMlpGemmParams(QWEN2_VL_72B)) / TP8 / GEMM_FLOPS_PER_MS,
  decodeBaseMs: (nonMlpGemmParams(QWEN2_VL_72B) * BF16_BYTES) / TP8 / H800_ACHIEVED_BYTES_PER_MS,
  prefillBaseMs: (nonMlpGemmParams(QWEN2_VL_72B) * BF16_BYTES) / TP8 / H800_ACHIEVED_BYTES_PER_MS,
  attnPerKvTokenMs: kvBytesPerToken(QWEN2_VL_72B) / TP8 / H800_HBM_BYTES_PER_MS,
  kvBytesPerToken: kvBytesPerToken(QWEN2_VL_72B),
  hbmKvCapacityTokens: kvCapacityTokens(QWEN2_VL_72B, TP8, H800_HBM_BYTES),
  blockSize: VLLM_BLOCK_SIZE,
  l2BandwidthBytesPerMs: TP8 * PCIE5_X16_BYTES_PER_MS,
  l3BandwidthBytesPerMs: TP8 * MOONCAKE_PER_GPU_BYTES_PER_MS,
};

/** Shipped profiles by name. */
export const COST_PROFILES: Readonly<Record<string, CostProfile>> = {
  [LLAMA3_8B_H100.name]: LLAMA3_8B_H100,
  [LLAMA3_70B_H200_TP4.name]: LLAMA3_70B_H200_TP4,
  [MOONLIGHT_16B_A3B_H800.name]: MOONLIGHT_16B_A3B_H800,
  [QWEN2_VL_72B_H800_TP8.name]: QWEN2_VL_72B_H800_TP8,
  [KIMI_K2_H800_DP16.name]: KIMI_K2_H800_DP16,
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
