// The trainer `arbor run` steps (config `train`): the deployment's trainer-api service (--cluster), the
// trainer protocol server an external trainer connects to (`train.external`), or the reference trainer in
// this process, started from the model file or from a resumed run's checkpoint and optimizer state.
import type { RunConfig } from "../core/config.js";
import type { Clock } from "../core/clock.js";
import { startExternalTrainer } from "../loop/external-trainer.js";
import { startReferenceTrainer } from "../loop/reference-trainer.js";
import type { ResumeState } from "../loop/resume-state.js";
import type { Trainer, TrainerStart, WeightSync } from "../loop/trainer-port.js";
import { scheduledLr } from "../trainer/lr-schedule.js";

export interface RunTrainerOptions {
  cfg: RunConfig;
  /** The deployment's trainer-api (--cluster): trains for an external trainer behind that service. */
  trainerApi?: (o: { runId: string; waitMs: number; signal: AbortSignal; start?: TrainerStart }) => Promise<Trainer>;
  /** The run's id (the trainer-api's orchestrator announces it). */
  runId: string;
  /** Loads each new version on the engines (the external trainer announces them through it). */
  weights: WeightSync;
  modelPath: string;
  clock: Clock;
  checkpointDir: string;
  signal: AbortSignal;
  log: (line: string) => void;
  resume?: ResumeState;
}

/** The run's trainer, or undefined when the config has no `train` (a rollout-only run). */
export async function startRunTrainer(o: RunTrainerOptions): Promise<Trainer | undefined> {
  const { cfg, resume } = o;
  const t = cfg.train;
  if (t === undefined) return undefined;
  // A resumed run's external trainer goes on from its last version (the trainer protocol says which, and its
  // checkpoint); the trainer keeps its own optimizer state (`arbor train-worker` beside its checkpoints).
  const start: TrainerStart | undefined = resume?.checkpoint !== undefined && resume.policyVersion > 0 ? { version: resume.policyVersion, modelPath: resume.checkpoint } : undefined;
  if (t.external && o.trainerApi) return o.trainerApi({ runId: o.runId, waitMs: t.external.waitMs, signal: o.signal, ...(start ? { start } : {}) });
  if (t.external) {
    const trainer = await startExternalTrainer({ config: t.external, weights: o.weights, modelPath: start?.modelPath ?? o.modelPath, ...(start ? { version: start.version } : {}), runId: o.runId, clock: o.clock, signal: o.signal, log: o.log });
    o.log(`trainer  ${trainer.url} (external: waiting for a trainer${start ? ` at policy v${start.version}` : ""})`);
    return trainer;
  }
  const lrAt = t.lrSchedule === "constant" ? undefined : (step: number) => scheduledLr(t.lr, step, cfg.iterations * t.epochs, t.lrSchedule, t.warmupSteps);
  const from = resume?.checkpoint !== undefined ? { version: resume.policyVersion, checkpoint: resume.checkpoint, ...(resume.optimizer !== undefined ? { optimizer: resume.optimizer } : {}) } : undefined;
  return startReferenceTrainer(o.modelPath, {
    lr: t.lr,
    maxGradNorm: t.maxGradNorm,
    clock: o.clock,
    checkpointDir: o.checkpointDir,
    keepCheckpoints: t.keepCheckpoints,
    epochs: t.epochs,
    ...(t.lrScale ? { lrScale: t.lrScale } : {}),
    ...(lrAt ? { lrAt } : {}),
    ...(from ? { resume: from } : {}),
    ...(t.draftModel ? { draftModel: t.draftModel } : {}),
  });
}
