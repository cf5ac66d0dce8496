/** What the numbers were measured on; written into every result file. */
import os from "node:os";

export interface MachineInfo {
  cpu: string;
  cores: number;
  total_memory_mb: number;
  node: string;
  os: string;
}

export function machineInfo(): MachineInfo {
  return {
    cpu: os.cpus()[0]?.model.trim() ?? "unknown",
    cores: os.availableParallelism(),
    total_memory_mb: Math.round(os.totalmem() / 2 ** 20),
    node: process.version,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
  };
}
