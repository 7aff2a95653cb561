// How an external inference engine is told to serve new policy weights through its own API (SGLang's
// update from disk, vLLM's sleep/wake and reload or LoRA adapters, an Arbor-managed llama-server restarted on
// the new GGUF). A loader only speaks to its engine; gating calls around a switch, recording per call the
// version that served it, converting checkpoints between formats and taking a failed engine out of rotation
// are done once for every engine by the caller (weights/synced-backend.ts, the run's weight sync).

/** What a generation in flight at a weight switch does (config `inFlightOnWeightSwitch`). */
export type InFlightOnSwitch = "finish" | "abort" | "resume";

/** The checkpoint format an engine loads: one GGUF file, or an HF directory (config.json + safetensors). */
export type WeightsFormat = "gguf" | "hf";

/**
 * One engine's weight loading. Life cycle of one switch, driven by the caller:
 *   1. the caller stops sending new calls to the engine;
 *   2. `mode = loader.prepare(requested)`: the engine does what it can for the in-flight calls. `finish`:
 *      the caller waits for them to end (always possible); `abort`: the engine aborted them (they end with an
 *      abort the caller records); `resume`: the engine holds them and continues them on the new weights. A
 *      loader that cannot honour `requested` answers the mode it falls back to (documented per loader);
 *   3. `load(path, version)` resolves once the engine serves `version` from `path` (confirmed by asking the
 *      engine where it can say), or rejects with an ArborError (code "weight_sync") naming the engine and why;
 *   4. the caller sends calls again.
 */
export interface EngineWeightLoader {
  /** Registry name of the mechanism, e.g. "sglang", "vllm-reload", "vllm-lora", "llamacpp-restart". */
  readonly kind: string;
  /** The format `load` takes. */
  readonly format: WeightsFormat;
  /** Step 2: hold or abort in-flight generations; returns the mode actually applied. */
  prepare(requested: InFlightOnSwitch): Promise<InFlightOnSwitch>;
  /** Step 3: serve `version` from `path` (a GGUF file or an HF directory, per `format`). */
  load(path: string, version: number): Promise<void>;
  /** After a failed `load`: undo `prepare` where it paused the engine (best effort; never throws). */
  recover?(): Promise<void>;
  /** The version the engine itself reports serving, or null when it has no notion of one. */
  servedVersion(): Promise<number | null>;
  /**
   * The model name requests must carry from now on, where loading changes it (a LoRA adapter per version);
   * undefined: unchanged.
   */
  modelName?(): string | undefined;
  /** Release what the loader owns (a managed engine process); idempotent. */
  close?(): Promise<void>;
}
