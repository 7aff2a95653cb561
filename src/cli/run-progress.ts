// The rollout progress bar `arbor run` draws on stderr (--progress).
import cliProgress from "cli-progress";
import type { RunConfig } from "../core/config.js";

/** The rollout progress bar on stderr: one bar per step, with the mean reward of the programs ended so far. */
export function progressBar(cfg: RunConfig, perStep: number): { program: (reward: number) => void; step: () => void; stop: () => void } {
  let bar: cliProgress.SingleBar | undefined;
  let step = 1;
  let done = 0;
  let rewardSum = 0;
  const label = cfg.rollout.mode === "async" ? "step" : "rollout";
  return {
    program: (reward) => {
      if (bar === undefined) {
        bar = new cliProgress.SingleBar(
          { format: `${label}${cfg.iterations > 1 ? ` ${step}/${cfg.iterations}` : ""} [{bar}] {value}/{total} programs | mean reward {reward} | {duration}s`, hideCursor: true, stream: process.stderr },
          cliProgress.Presets.shades_classic,
        );
        bar.start(perStep, 0, { reward: "-" });
      }
      done++;
      rewardSum += reward;
      bar.update(done, { reward: (rewardSum / done).toFixed(3) });
    },
    step: () => {
      bar?.stop();
      bar = undefined;
      step++;
      done = 0;
      rewardSum = 0;
    },
    stop: () => bar?.stop(),
  };
}
