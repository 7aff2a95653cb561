// The CPU time another process has used so far, read from Linux's /proc: `arbor bench gateway` reports what its
// upstream and load generator processes cost per request, since on a 2-core machine they share the cores with the
// gateway it measures.
import { readFileSync } from "node:fs";

/** Clock ticks per second of /proc's times (USER_HZ: 100 on every architecture Linux exposes it for). */
const USER_HZ = 100;

/** User + system CPU time of process `pid` so far, ms; undefined where /proc cannot tell (another OS, gone). */
export function processCpuMs(pid: number): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // Fields after the command name (which may hold spaces and parentheses): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime)) return undefined;
  return ((utime + stime) * 1000) / USER_HZ;
}
