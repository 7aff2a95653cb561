// A simulated workload and the named systems it can run (issue 18): `arbor sim` runs one scenario
// once per system and collects the results into a SimReport.
import type { SimSystemResult, SimWorkloadInfo } from "./sim-report.js";

export interface SimScenario { info: SimWorkloadInfo; systems: readonly string[]; run(system: string, o: { seed: number; scale: number }): Promise<SimSystemResult> }
