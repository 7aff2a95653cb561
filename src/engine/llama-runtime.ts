// The process-wide llama.cpp runtimes. Loading the native binary is slow and must happen once, so
// every executor shares one cached `getLlama` promise per build: the CPU prebuilt binary (the
// default: no download, no compile, the install stays slim) and, only when an engine asks for
// `gpu: "auto"`, whichever GPU build node-llama-cpp finds installed (CUDA, Vulkan, Metal), falling
// back to the CPU one where there is none.
import { getLlama, LlamaLogLevel, type Llama } from "node-llama-cpp";

/** Which llama.cpp build an engine runs on: false = CPU (default), "auto" = a GPU build where installed. */
export type LlamaGpu = false | "auto";

const runtimes = new Map<LlamaGpu, Promise<Llama>>();

/** The shared llama.cpp runtime of `gpu` (default the CPU prebuilt binary), loaded on first use. */
export function llamaRuntime(gpu: LlamaGpu = false): Promise<Llama> {
  let runtime = runtimes.get(gpu);
  if (!runtime) {
    runtime = getLlama({ gpu, build: "never", logLevel: LlamaLogLevel.error, progressLogs: false });
    runtimes.set(gpu, runtime);
    // A failed load must not poison later attempts (e.g. after the binary is repaired).
    runtime.catch(() => {
      runtimes.delete(gpu);
    });
  }
  return runtime;
}
