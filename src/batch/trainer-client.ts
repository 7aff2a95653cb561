// A small client of the trainer protocol (trainer-server.ts) for trainers written in TypeScript, and the
// reference for external ones: pull a batch, read its Arrow file, acknowledge it, announce new weights.
import { ArborError } from "../core/errors.js";
import { batchFromArrow, type ImportedBatch } from "./export-arrow.js";
import type { StepMetrics, TrainerServerStats } from "./trainer-server.js";

async function errorOf(res: Response, what: string): Promise<never> {
  let detail = "";
  try {
    detail = ((await res.json()) as { error?: string }).error ?? "";
  } catch {
    // not JSON: the status says enough
  }
  throw new ArborError(`trainer protocol: ${what}: HTTP ${res.status}${detail ? ` (${detail})` : ""}`, "trainer_protocol");
}

/** Client of one trainer protocol server at `baseUrl` (e.g. `http://127.0.0.1:8400`). */
export class TrainerClient {
  constructor(private readonly baseUrl: string) {}

  private async fetch(path: string, init?: RequestInit): Promise<Response> {
    try {
      return await fetch(`${this.baseUrl}${path}`, init);
    } catch (e) {
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      throw new ArborError(`trainer protocol: cannot reach ${this.baseUrl}${path}: ${cause?.code ?? cause?.message ?? (e as Error).message}`, "trainer_protocol");
    }
  }

  /** The next batch, or null when none is queued. Remember to {@link ack} it once trained on. */
  async nextBatch(): Promise<ImportedBatch | null> {
    const res = await this.fetch(`/v1/batches/next`);
    if (res.status === 204) return null;
    if (!res.ok) return errorOf(res, "GET /v1/batches/next");
    const batch = batchFromArrow(new Uint8Array(await res.arrayBuffer()));
    const header = res.headers.get("x-arbor-batch-id");
    if (header !== batch.id) throw new ArborError(`trainer protocol: batch id header '${header}' differs from the file's '${batch.id}'`, "trainer_protocol");
    return batch;
  }

  /** Mark a batch as trained on; `metrics`: what the step measured, for the run's metrics (sent as the ack's body). */
  async ack(batchId: string, metrics?: StepMetrics): Promise<void> {
    const body = metrics === undefined ? undefined : JSON.stringify({ metrics: { loss: finiteOrNull(metrics.loss), grad_norm: finiteOrNull(metrics.gradNorm), entropy: finiteOrNull(metrics.entropy) } });
    const res = await this.fetch(`/v1/batches/${encodeURIComponent(batchId)}/ack`, body === undefined ? { method: "POST" } : { method: "POST", headers: { "content-type": "application/json" }, body });
    if (!res.ok) await errorOf(res, `ack ${batchId}`);
  }

  /** Give a batch back untrained. */
  async requeue(batchId: string): Promise<void> {
    const res = await this.fetch(`/v1/batches/${encodeURIComponent(batchId)}/requeue`, { method: "POST" });
    if (!res.ok) await errorOf(res, `requeue ${batchId}`);
  }

  /** The trainer still works on a batch it took: the server keeps it out with this trainer (its lease starts again). */
  async heartbeat(batchId: string): Promise<void> {
    const res = await this.fetch(`/v1/batches/${encodeURIComponent(batchId)}/heartbeat`, { method: "POST" });
    if (!res.ok) await errorOf(res, `heartbeat ${batchId}`);
  }

  /** Announce new weights, trained on `batchId` when given: `policyVersion` must exceed the current one. */
  async announceWeights(policyVersion: number, modelPath: string, batchId?: string): Promise<void> {
    const res = await this.fetch(`/v1/weights`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ policy_version: policyVersion, model_path: modelPath, ...(batchId !== undefined ? { batch_id: batchId } : {}) }),
    });
    if (!res.ok) await errorOf(res, "POST /v1/weights");
  }

  async stats(): Promise<TrainerServerStats> {
    const res = await this.fetch(`/v1/stats`);
    if (!res.ok) return errorOf(res, "GET /v1/stats");
    return (await res.json()) as TrainerServerStats;
  }
}

/** A metric as JSON: null when absent or not finite (JSON has no NaN). */
function finiteOrNull(x: number | undefined): number | null {
  return x !== undefined && Number.isFinite(x) ? x : null;
}
