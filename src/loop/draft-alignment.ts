// Keeps a draft model aligned with the policy during RL (issue 17 item 6, config `train.draftModel`): after
// each reference-trainer step, the draft is distilled again from the new policy on that batch's rollout
// sequences (Top-K KL, trainer/draft-distiller.ts) and written as `draft-vN.gguf` beside the `policy-vN.gguf`
// the weight sync is about to load, so an engine with `speculative.method: draft-model` serves the draft of
// the version it serves. Drafts of versions the checkpoint folder no longer keeps are removed with them.
import { readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { draftModelPath } from "../model/draft-model-path.js";
import { vocabTokenizerSpec } from "../model/gguf.js";
import { Vocab } from "../model/vocab.js";
import { readManifest } from "../trainer/checkpoint.js";
import { DraftDistiller, type DistillResult, type DistillSequence, type DraftModelOptions } from "../trainer/draft-distiller.js";
import type { Trainer as TfTrainer } from "../trainer/trainer.js";

/** What one refresh wrote. */
export interface DraftRefresh extends DistillResult {
  /** The draft GGUF written beside the checkpoint. */
  path: string;
}

/** The draft model of a run; create with {@link DraftAlignment.start}, `dispose()` when done. */
export class DraftAlignment {
  private constructor(private readonly distiller: DraftDistiller) {}

  /** A draft cut from the trainer's current policy (its first `layers` blocks); options checked against it. */
  static async start(trainer: TfTrainer, options: DraftModelOptions, seed = 0): Promise<DraftAlignment> {
    const tokenizer = trainer.tokenizer ?? vocabTokenizerSpec(new Vocab());
    return new DraftAlignment(await DraftDistiller.create(trainer.config, trainer.model.toTensors(), tokenizer, options, seed));
  }

  /**
   * Distil the draft from the trainer's policy (just stepped) on `sequences` (the batch's token ids, with the
   * generated tokens marked: the positions drafts are asked for) and write
   * it beside `checkpoint` (`policy-vN.gguf` → `draft-vN.gguf`), removing drafts of versions no longer kept.
   */
  refresh(trainer: TfTrainer, sequences: readonly DistillSequence[], checkpoint: string): DraftRefresh {
    const result = this.distiller.distill(trainer.model, sequences);
    const path = draftModelPath(checkpoint);
    this.distiller.save(path, trainer.version);
    const dir = dirname(checkpoint);
    const kept = new Set(readManifest(dir)?.retained ?? [trainer.version]);
    for (const f of readdirSync(dir)) {
      const v = /^draft-v(\d+)\.gguf$/.exec(f)?.[1];
      if (v !== undefined && !kept.has(Number(v))) rmSync(join(dir, f), { force: true });
    }
    return { ...result, path };
  }

  dispose(): void {
    this.distiller.dispose();
  }
}
