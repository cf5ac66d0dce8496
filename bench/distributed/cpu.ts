/** CPU time of processes, for the distributed suite's cost per rollout. */
import { readFileSync } from "node:fs";

/** Clock ticks per second of /proc's utime and stime (USER_HZ: 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** User + system CPU milliseconds process `pid` has used so far, from /proc/PID/stat (Linux). */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / TICKS_PER_SECOND;
}

/** This process's user + system CPU milliseconds so far. */
export function ownCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** CPU milliseconds so far of this process (`driver`), of the `workers` and of the Redis server. */
export function cpuParts(workers: readonly number[], redis: number | undefined): CpuParts {
  return {
    driver: ownCpuMs(),
    workers: workers.reduce((sum, pid) => sum + processCpuMs(pid), 0),
    redis: redis === undefined ? 0 : processCpuMs(redis),
  };
}

/** CPU milliseconds by process. */
export interface CpuParts {
  driver: number;
  workers: number;
  redis: number;
}
