/**
 * {@link DataLoader}: hands out task groups from data files in a seeded order, epoch after epoch,
 * with an exact resume cursor.
 * @module
 */
import { deriveSeed, shuffleInPlace } from "./seed.js";
import { isTaskPrompt, taskPrompt, type RolloutTask, type TaskGroup } from "../contracts/task.js";
import type { DataRow } from "../contracts/task.js";
import { readRowTable } from "./files.js";
import { RowTable } from "./row-table.js";
import { InputError } from "../errors.js";

/** How prompts too long for the model are dropped. */
export interface PromptFilter {
  /** Longest prompt kept, in tokens. */
  maxPromptLength: number;
  /** Length of a prompt in tokens (text is encoded, chat messages templated). */
  measure(prompt: RolloutTask["prompt"]): number;
}

/** Options of {@link DataLoader}. */
export interface DataLoaderOptions {
  /** The field holding the prompt (`data.prompt_key`); every row must have it. */
  promptKey: string;
  /** Rows per batch (`data.batch_size`), before `rolloutRepeatN` copies. */
  batchSize: number;
  /** Seed of the run: the shuffle of each epoch and every task's sampling seed derive from it. */
  seed: number;
  /** Draw a new seeded order of the rows for each epoch (default false: file order). */
  shuffle?: boolean;
  /** Drop the last batch of an epoch when it is short (default false). */
  dropLast?: boolean;
  /** Copies of each row (`data.rollout_repeat_n`, default 1): one group, distinct run ids. */
  rolloutRepeatN?: number;
  /** Tasks are validation tasks (default false). */
  isVal?: boolean;
  /** Drop rows whose prompt is too long. */
  filter?: PromptFilter;
  /** Stop after this many passes over the data (default: never; the run's step count decides). */
  maxEpochs?: number;
}

/** A row handed out again before new ones (e.g. its group was too stale to train on). */
export interface RequeuedRow {
  /** Row index within the dataset. */
  index: number;
  /** Epoch it was first handed out in. */
  epoch: number;
}

/** Where a {@link DataLoader} stands; restoring it continues exactly from there. */
export interface DataCursor {
  /** Current epoch. */
  epoch: number;
  /** Next position in the epoch's order. */
  position: number;
  /** Batches handed out so far (the next batch's index). */
  batches: number;
  /** Groups handed out so far. */
  groups: number;
  /** Rows to hand out before new ones, in order. */
  requeued: RequeuedRow[];
}

/**
 * Tasks from data rows. Each row becomes a group of `rolloutRepeatN` tasks sharing a group id;
 * {@link DataLoader.nextBatch} hands out `batchSize` groups at a time the way a PyTorch data loader
 * does (consecutive slices of the epoch's order, the last one short unless `dropLast`), and
 * {@link DataLoader.nextGroup} streams single groups across epoch boundaries. Epochs repeat until
 * `maxEpochs` (by default forever); each epoch has its own seeded order.
 *
 * @example
 * ```ts
 * const loader = await DataLoader.fromFiles(["data/train.jsonl"], { promptKey: "prompt", batchSize: 8, seed: 42, shuffle: true });
 * const batch = loader.nextBatch(); // 8 groups
 * const saved = loader.cursor();    // later: loader.restore(saved)
 * ```
 */
export class DataLoader {
  private readonly rows: readonly DataRow[] | RowTable;
  /** Indices of the rows the prompt filter kept, ascending. */
  private readonly kept: Uint32Array;
  private readonly options: Required<Omit<DataLoaderOptions, "filter" | "maxEpochs">> &
    Pick<DataLoaderOptions, "maxEpochs">;
  private state: DataCursor = { epoch: 0, position: 0, batches: 0, groups: 0, requeued: [] };
  private orderCache: { epoch: number; order: Uint32Array } | undefined;
  /** Rows dropped by the prompt filter. */
  readonly filtered: number;

  /**
   * @param rows the task rows (each must have the prompt key): objects, or a table read from files.
   * @param options batching, order and filtering.
   * @param source describes where array rows came from, for errors (a table names its files).
   * @throws {@link "nexrl/errors".InputError | InputError} when a row is not an object or lacks the prompt key, or no row
   * is left after filtering.
   */
  constructor(rows: readonly DataRow[] | RowTable, options: DataLoaderOptions, source = "the data") {
    for (const [key, value] of [
      ["batchSize", options.batchSize],
      ["rolloutRepeatN", options.rolloutRepeatN ?? 1],
    ] as const) {
      if (!Number.isInteger(value) || value < 1)
        throw new InputError(`DataLoader ${key} must be a positive integer, got ${value}`);
    }
    this.rows = rows;
    this.options = {
      promptKey: options.promptKey,
      batchSize: options.batchSize,
      seed: options.seed,
      shuffle: options.shuffle ?? false,
      dropLast: options.dropLast ?? false,
      rolloutRepeatN: options.rolloutRepeatN ?? 1,
      isVal: options.isVal ?? false,
      maxEpochs: options.maxEpochs,
    };
    const { promptKey, filter } = options;
    // Each row is parsed once here, to check it and measure its prompt; groups parse it again when handed out.
    const kept = new Uint32Array(rows.length);
    let count = 0;
    for (let i = 0; i < rows.length; i++) {
      const row = rows instanceof RowTable ? rows.row(i) : rows[i]!;
      if (!Object.hasOwn(row, promptKey)) {
        const where = rows instanceof RowTable ? rows.origin(i).label : `row ${i + 1} of ${source}`;
        const fields = Object.keys(row).join(", ") || "none";
        throw new InputError(
          `${where} has no field "${promptKey}" (data.prompt_key); its fields are: ${fields}. Set data.prompt_key to the field that holds the prompt`,
        );
      }
      const prompt = row[promptKey];
      if (!isTaskPrompt(prompt)) {
        const where = rows instanceof RowTable ? rows.origin(i).label : `row ${i + 1} of ${source}`;
        throw new InputError(
          `${where}: its prompt field "${promptKey}" (data.prompt_key) must be text or a list of {role, content} chat messages with text content, got ${JSON.stringify(prompt)?.slice(0, 80)}`,
        );
      }
      if (filter === undefined || filter.measure(taskPrompt(prompt)) <= filter.maxPromptLength) kept[count++] = i;
    }
    this.kept = kept.subarray(0, count);
    this.filtered = rows.length - count;
    if (count === 0) {
      const why =
        this.filtered > 0
          ? `all ${rows.length} rows have prompts longer than ${filter!.maxPromptLength} tokens (data.max_prompt_length)`
          : "it has no rows";
      throw new InputError(`no task left in ${source}: ${why}`);
    }
    if (this.options.dropLast && count < this.options.batchSize) {
      const section = this.options.isVal ? "validate.data" : "data";
      throw new InputError(
        `${source} has ${count} task rows${this.filtered > 0 ? " left after the prompt filter" : ""}, fewer than ${section}.batch_size (${this.options.batchSize}), and ${section}.drop_last leaves out every batch shorter than that: lower batch_size or set drop_last: false`,
      );
    }
  }

  /**
   * Reads `files` (see {@link readRowTable}) and builds a loader over their rows, in file order.
   * The rows are held as their JSON text, so millions of rows fit in about the files' size.
   * @throws {@link "nexrl/errors".InputError | InputError} for unreadable files, rows that are not JSON objects, or rows
   * without the prompt key.
   */
  static async fromFiles(files: readonly string[], options: DataLoaderOptions): Promise<DataLoader> {
    if (files.length === 0) throw new InputError("no data files given; list them in data.data_files");
    return new DataLoader(await readRowTable(files), options, files.join(", "));
  }

  /** Rows handed out per epoch (after filtering). */
  get size(): number {
    return this.kept.length;
  }

  /** Batches handed out so far (the index of the next one). */
  get batches(): number {
    return this.state.batches;
  }

  /** Batches per epoch. */
  get batchesPerEpoch(): number {
    const { batchSize, dropLast } = this.options;
    return dropLast ? Math.floor(this.size / batchSize) : Math.ceil(this.size / batchSize);
  }

  /** The next `batchSize` groups (fewer at the end of an epoch unless `dropLast`), or undefined after `maxEpochs`. */
  nextBatch(): TaskGroup[] | undefined {
    const { batchSize, dropLast } = this.options;
    const s = this.state;
    const groups: TaskGroup[] = [];
    while (groups.length === 0) {
      if (this.finished()) return undefined;
      const order = this.order(s.epoch);
      const left = order.length - s.position;
      if (left === 0 || (dropLast && left < batchSize)) {
        s.epoch += 1;
        s.position = 0;
        continue;
      }
      const take = Math.min(batchSize, left);
      for (let k = 0; k < take; k++) groups.push(this.group(order[s.position + k]!, s.epoch, s.batches));
      s.position += take;
    }
    s.batches += 1;
    s.groups += groups.length;
    return groups;
  }

  /**
   * The next single group: a requeued row first, else the next row of the epoch's order (moving
   * to the next epoch at the end). Undefined after `maxEpochs`. Its batch index counts
   * `batchSize` groups per batch.
   */
  nextGroup(): TaskGroup | undefined {
    const s = this.state;
    const batchIndex = Math.floor(s.groups / this.options.batchSize);
    const requeued = s.requeued.shift();
    if (requeued !== undefined) {
      s.groups += 1;
      return this.group(requeued.index, requeued.epoch, batchIndex);
    }
    while (!this.finished() && s.position >= this.order(s.epoch).length) {
      s.epoch += 1;
      s.position = 0;
    }
    if (this.finished()) return undefined;
    const index = this.order(s.epoch)[s.position]!;
    s.position += 1;
    s.groups += 1;
    return this.group(index, s.epoch, batchIndex);
  }

  /** Hands `group`'s row out again before any new row (with new seeds). */
  requeue(group: Pick<TaskGroup, "index" | "epoch">): void {
    this.state.requeued.push({ index: group.index, epoch: group.epoch });
  }

  /**
   * Every row once, as groups of `rolloutRepeatN` tasks whose seeds derive from `pass`
   * (validation runs the whole set each time), in file order. With `dropLast`, the rows after the
   * last full batch of the pass's order (shuffled anew each pass with `shuffle`) are left out.
   * Does not move the cursor.
   */
  allGroups(pass: number): TaskGroup[] {
    const { dropLast, batchSize } = this.options;
    const rows = dropLast
      ? this.order(pass)
          .subarray(0, this.size - (this.size % batchSize))
          .slice()
          .sort()
      : this.kept;
    return Array.from(rows, (index) => this.group(index, 0, pass));
  }

  /** A copy of the position, for a checkpoint. */
  cursor(): DataCursor {
    return structuredClone(this.state);
  }

  /**
   * Continues from a cursor taken with {@link DataLoader.cursor}.
   * @throws {@link "nexrl/errors".InputError | InputError} when the cursor does not fit this data (another dataset).
   */
  restore(cursor: DataCursor): void {
    const ok =
      [cursor.epoch, cursor.position, cursor.batches, cursor.groups].every((n) => Number.isInteger(n) && n >= 0) &&
      cursor.position <= this.size &&
      Array.isArray(cursor.requeued) &&
      cursor.requeued.every((r) => Number.isInteger(r.index) && r.index >= 0 && r.index < this.rows.length);
    if (!ok)
      throw new InputError(
        `the saved data cursor ${JSON.stringify(cursor)} does not fit this dataset of ${this.size} rows; resume with the data files the run started with`,
      );
    this.state = structuredClone(cursor);
  }

  private finished(): boolean {
    return this.options.maxEpochs !== undefined && this.state.epoch >= this.options.maxEpochs;
  }

  private order(epoch: number): Uint32Array {
    if (this.orderCache?.epoch !== epoch) {
      const order = this.options.shuffle
        ? shuffleInPlace(this.kept.slice(), deriveSeed(this.options.seed, "epoch", epoch))
        : this.kept;
      this.orderCache = { epoch, order };
    }
    return this.orderCache.order;
  }

  /** The group of row `index` as handed out in `epoch` and batch `batchIndex` (to rebuild saved groups). */
  groupOf(position: { index: number; epoch: number; batchIndex: number }): TaskGroup {
    return this.group(position.index, position.epoch, position.batchIndex);
  }

  private group(index: number, epoch: number, batchIndex: number): TaskGroup {
    const { rolloutRepeatN: n, isVal, seed, promptKey } = this.options;
    const data = this.rows instanceof RowTable ? this.rows.row(index) : this.rows[index]!;
    const groupId = isVal ? `val-${index}` : `${epoch}-${index}`;
    const tasks: RolloutTask[] = [];
    for (let runId = 0; runId < n; runId++) {
      tasks.push({
        data,
        prompt: taskPrompt(data[promptKey]),
        index,
        epoch,
        batchIndex,
        groupId,
        runId,
        groupSize: n,
        isVal,
        seed: deriveSeed(seed, isVal ? "val" : "rollout", batchIndex, epoch, index, runId),
      });
    }
    return { groupId, index, epoch, batchIndex, tasks };
  }
}
