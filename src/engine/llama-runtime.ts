// The process-wide llama.cpp runtime. Loading the native binary is slow and must happen once, so
// every executor shares one cached `getLlama` promise (CPU build only: no download, no compile).
import { getLlama, LlamaLogLevel, type Llama } from "node-llama-cpp";

let runtime: Promise<Llama> | undefined;

/** The shared llama.cpp runtime (CPU prebuilt binary), loaded on first use. */
export function llamaRuntime(): Promise<Llama> {
  if (!runtime) {
    runtime = getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, progressLogs: false });
    // A failed load must not poison later attempts (e.g. after the binary is repaired).
    runtime.catch(() => {
      runtime = undefined;
    });
  }
  return runtime;
}
