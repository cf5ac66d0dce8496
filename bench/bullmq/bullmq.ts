/**
 * BullMQ for the distributed suite, loaded from bench/bullmq/node_modules (installed from the
 * committed lock file on first use), with the few types of its API the bench uses.
 */
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { ensureBenchPackages } from "../lib/packages.js";

const bullmqDir = path.dirname(fileURLToPath(import.meta.url));

/** ioredis connection options: what BullMQ's classes take to open their own connections. */
export interface Connection {
  host: string;
  port: number;
}

/** A job as a processor sees it. */
export interface BullJob {
  data: { body: string };
  /** Attempts made before this one. */
  attemptsMade: number;
}

export interface BullQueue {
  add(name: string, data: { body: string }): Promise<unknown>;
  addBulk(jobs: Array<{ name: string; data: { body: string } }>): Promise<unknown>;
  close(): Promise<void>;
}

export interface BullQueueEvents {
  on(event: "completed", listener: (args: { jobId: string; returnvalue: string }) => void): unknown;
  on(event: "failed", listener: (args: { jobId: string; failedReason: string }) => void): unknown;
  off(event: "completed" | "failed", listener: (...args: never[]) => void): unknown;
  waitUntilReady(): Promise<unknown>;
  close(): Promise<void>;
}

export interface BullWorker {
  waitUntilReady(): Promise<unknown>;
  on(event: "error", listener: (error: Error) => void): unknown;
  close(): Promise<void>;
}

export interface Bullmq {
  Queue: new (
    name: string,
    options: { connection: Connection; defaultJobOptions: { removeOnComplete: boolean; removeOnFail: boolean } },
  ) => BullQueue;
  QueueEvents: new (name: string, options: { connection: Connection }) => BullQueueEvents;
  Worker: new (
    name: string,
    processor: (job: BullJob) => Promise<string>,
    options: { connection: Connection; concurrency: number },
  ) => BullWorker;
}

/** The installed BullMQ module and its version. */
export async function loadBullmq(log: (message: string) => void): Promise<{ bullmq: Bullmq; version: string }> {
  ensureBenchPackages(bullmqDir, "bullmq", "BullMQ", log);
  const require = createRequire(path.join(bullmqDir, "package.json"));
  const bullmq = (await import(pathToFileURL(require.resolve("bullmq")).href)) as Bullmq;
  const { version } = require("bullmq/package.json") as { version: string };
  return { bullmq, version };
}

/** The connection options of `redis://host:port`. */
export function connectionOf(redisUrl: string): Connection {
  const url = new URL(redisUrl);
  return { host: url.hostname, port: Number(url.port) };
}
