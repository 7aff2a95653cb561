// The trainer's tensor runtime: @tensorflow/tfjs on the wasm back-end (pure float32 CPU kernels,
// deterministic across runs). Selecting the back-end is async and process-wide, so it happens once.
import * as tf from "@tensorflow/tfjs";
import "@tensorflow/tfjs-backend-wasm";
import { ArborError } from "../core/errors.js";

let ready: Promise<typeof tf> | undefined;

/** The tfjs module with the wasm back-end selected; the first call initialises it. */
export function tfWasm(): Promise<typeof tf> {
  if (!ready) {
    ready = (async () => {
      const ok = await tf.setBackend("wasm");
      if (!ok || tf.getBackend() !== "wasm") throw new ArborError("trainer: the tfjs wasm back-end failed to initialise", "trainer");
      return tf;
    })();
    // A failed start must not poison later attempts.
    ready.catch(() => {
      ready = undefined;
    });
  }
  return ready;
}
