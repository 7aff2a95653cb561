// The progress `arbor sim` shows on stderr while its systems run: on a terminal, a bar per running system (requests
// or programs finished of the run's total); elsewhere, a line when a system starts and one when it ends. A system
// may run in this thread, whose event loop the simulation holds until it ends, so the bars are redrawn from the
// progress callbacks themselves rather than from cli-progress's timer.
import { performance } from "node:perf_hooks";
import cliProgress from "cli-progress";
import type { SimSystemResult } from "../sim/scenario/sim-report.js";

/** Least wall time between two redraws, ms. */
const REDRAW_MS = 100;

/** What `runSeed` tells the display. */
export interface SimProgress {
  /** A system started (`result` undefined) or ended. */
  system(system: string, result?: SimSystemResult): void;
  /** A system's run advanced: `done` of `total` requests or programs finished. */
  advance(system: string, done: number, total: number): void;
  /** Every system ended or the run failed: the bars go. */
  stop(): void;
}

/** The line printed when `system` ends (and, without bars, when it starts). */
export function systemLine(workload: string, system: string, r?: SimSystemResult): string {
  if (r === undefined) return `arbor sim ${workload}: ${system} …`;
  return `arbor sim ${workload}: ${system}: iteration ${(r.summary.iterationMs / 1000).toFixed(1)} s, ${r.summary.completed}/${r.summary.requests} requests, ${r.summary.outputTokens} tokens`;
}

/** The display for `workload`: bars when `bars` (stderr is a terminal and --no-progress was not given), else lines. */
export function simProgress(workload: string, bars: boolean, log: (line: string) => void = (l) => console.error(l)): SimProgress {
  if (!bars) {
    return { system: (s, r) => log(systemLine(workload, s, r)), advance: () => {}, stop: () => {} };
  }
  const multi = new cliProgress.MultiBar(
    { format: `${workload} {system} [{bar}] {value}/{total} finished | {duration}s`, hideCursor: true, stream: process.stderr, clearOnComplete: true },
    cliProgress.Presets.shades_classic,
  );
  const running = new Map<string, cliProgress.SingleBar>();
  let lastRedraw = 0;
  return {
    system: (s, r) => {
      if (r === undefined) {
        running.set(s, multi.create(1, 0, { system: s }));
        return;
      }
      const bar = running.get(s);
      if (bar !== undefined) multi.remove(bar);
      running.delete(s);
      // Above the bars that are still running, where it stays.
      multi.log(`${systemLine(workload, s, r)}\n`);
      multi.update();
    },
    advance: (s, done, total) => {
      const bar = running.get(s);
      if (bar === undefined) return;
      bar.setTotal(total);
      bar.update(done);
      const now = performance.now();
      if (now - lastRedraw >= REDRAW_MS) {
        lastRedraw = now;
        multi.update();
      }
    },
    stop: () => multi.stop(),
  };
}
