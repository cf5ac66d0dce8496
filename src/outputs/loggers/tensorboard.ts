/**
 * {@link TensorBoardLogger}: a run's metrics as TensorBoard event files, so that
 * `tensorboard --logdir runs/` charts every run.
 *
 * An event file is a TFRecord file of `tensorflow.Event` protocol buffers. Each record is
 *
 * ```
 * uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
 * ```
 *
 * (little-endian; `masked(c) = ((c >>> 15) | (c << 17)) + 0xa282ead8`). The first event holds
 * `file_version: "brain.Event:2"`; each step is one event with `wall_time`, `step` and a
 * `Summary` of `simple_value`s, one per numeric metric. Each session's file starts with a
 * `SessionLog` of status `START` at the first step it writes (0 for a fresh run, the step after
 * the checkpoint for a resume): TensorBoard then drops the steps from that one on that an earlier
 * file in the folder holds, which this session writes again (or which a replaced run wrote).
 *
 * @module
 * @internal
 */
import { appendFile, truncate } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { crc32c } from "../../engine/crc32.js";
import { storageError } from "../../errors.js";
import type { MetricsRow } from "../events.js";

/** Appends protocol buffer fields to a byte list (the few wire types an `Event` needs). */
class ProtoWriter {
  private readonly bytes: number[] = [];

  varint(field: number, value: number): this {
    return this.tag(field, 0).raw(value);
  }

  double(field: number, value: number): this {
    const buffer = Buffer.alloc(8);
    buffer.writeDoubleLE(value);
    return this.tag(field, 1).append(buffer);
  }

  float(field: number, value: number): this {
    const buffer = Buffer.alloc(4);
    buffer.writeFloatLE(value);
    return this.tag(field, 5).append(buffer);
  }

  message(field: number, content: Uint8Array): this {
    return this.tag(field, 2).raw(content.length).append(content);
  }

  string(field: number, value: string): this {
    return this.message(field, Buffer.from(value, "utf8"));
  }

  done(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }

  private append(content: Uint8Array): this {
    for (const byte of content) this.bytes.push(byte);
    return this;
  }

  private tag(field: number, wireType: number): this {
    return this.raw(field * 8 + wireType);
  }

  /** A varint of a non-negative safe integer. */
  private raw(value: number): this {
    let rest = value;
    while (rest >= 0x80) {
      this.bytes.push((rest % 0x80) | 0x80);
      rest = Math.floor(rest / 0x80);
    }
    this.bytes.push(rest);
    return this;
  }
}

const masked = (crc: number): number => ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0;

/** One TFRecord holding `data`. */
function record(data: Uint8Array): Buffer {
  const header = Buffer.alloc(12);
  header.writeBigUInt64LE(BigInt(data.length));
  header.writeUInt32LE(masked(crc32c(header.subarray(0, 8))), 8);
  const footer = Buffer.alloc(4);
  footer.writeUInt32LE(masked(crc32c(data)));
  return Buffer.concat([header, data, footer]);
}

/** `Event` field numbers (tensorflow/core/util/event.proto). */
const EVENT = { wallTime: 1, step: 2, fileVersion: 3, summary: 5, sessionLog: 6 } as const;
/** `SessionLog.status` START. */
const SESSION_START = 1;

/** The `Summary` of a metrics row: one `simple_value` per finite number, tagged with its name. */
function summary(row: MetricsRow): Uint8Array {
  const writer = new ProtoWriter();
  for (const [tag, value] of Object.entries(row)) {
    if (tag === "step" || typeof value !== "number" || !Number.isFinite(value)) continue;
    writer.message(1, new ProtoWriter().string(1, tag).float(2, value).done());
  }
  return writer.done();
}

/**
 * Writes a run's metrics rows into an event file of its own in the run folder. A write that
 * fails (a full disk) keeps its records and is tried again with the next row, so no step is lost
 * once the disk has room; it warns once.
 */
export class TensorBoardLogger {
  private pending: Buffer[] = [];
  /** Bytes of the file that hold whole records. */
  private written = 0;
  private warned = false;

  private constructor(
    /** The event file. */
    readonly path: string,
    private readonly warn: (message: string) => void,
  ) {}

  /**
   * A logger writing to a new event file in `dir`; `firstStep` is the first step this session
   * writes (0 for a fresh run; after a resume, the step after its checkpoint's).
   */
  static async open(dir: string, firstStep: number, warn: (message: string) => void): Promise<TensorBoardLogger> {
    const now = Date.now() / 1000;
    const logger = new TensorBoardLogger(
      // TensorBoard reads a folder's files in name order: the milliseconds keep two sessions of one second in order.
      join(dir, `events.out.tfevents.${Math.floor(now)}.${hostname()}.${process.pid}.${Date.now()}`),
      warn,
    );
    logger.pending.push(
      record(new ProtoWriter().double(EVENT.wallTime, now).string(EVENT.fileVersion, "brain.Event:2").done()),
    );
    const start = new ProtoWriter().varint(1, SESSION_START).done();
    logger.pending.push(
      record(
        new ProtoWriter()
          .double(EVENT.wallTime, now)
          .varint(EVENT.step, firstStep)
          .message(EVENT.sessionLog, start)
          .done(),
      ),
    );
    await logger.flush();
    return logger;
  }

  /** Writes the metrics of one step. */
  async step(row: MetricsRow): Promise<void> {
    const event = new ProtoWriter()
      .double(EVENT.wallTime, Date.now() / 1000)
      .varint(EVENT.step, row.step)
      .message(EVENT.summary, summary(row))
      .done();
    this.pending.push(record(event));
    await this.flush();
  }

  private async flush(): Promise<void> {
    const bytes = Buffer.concat(this.pending);
    try {
      await appendFile(this.path, bytes);
      this.pending = [];
      this.written += bytes.length;
    } catch (error) {
      // A write cut short must not leave half a record for the retry to follow.
      try {
        await truncate(this.path, this.written);
      } catch {
        // Nothing to cut back (the file was never made): the retry writes every record anew.
      }
      if (this.warned) return;
      this.warned = true;
      const reason = storageError(this.path, error);
      this.warn(
        `the TensorBoard logger could not write (${reason instanceof Error ? reason.message : String(reason)}); it keeps the steps and writes them with the next one that succeeds`,
      );
    }
  }
}
