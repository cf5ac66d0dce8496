/**
 * The trainer classes' names before they were named for what they do (`RemoteApi…`), kept as
 * aliases for one minor version: each is the renamed class itself, so `extends`, `new` and
 * `instanceof` work with either name.
 * @module
 */
import { BaseTrainer } from "./base-trainer.js";
import { CrossEntropyTrainer } from "./cross-entropy.js";
import { DpoTrainer } from "./dpo.js";
import { GrpoTrainer } from "./grpo.js";
import { OnPolicyDistillationTrainer } from "./opd.js";
import { PreferenceTrainer } from "./preference.js";
import { RewardModelTrainer } from "./reward-model.js";
import type { ClassOptions } from "../contracts/options.js";

/** @deprecated Renamed {@link BaseTrainer}; `RemoteApiTrainer` goes in the next minor version. */
export const RemoteApiTrainer = BaseTrainer;
/** @deprecated Renamed {@link BaseTrainer}; `RemoteApiTrainer` goes in the next minor version. */
export type RemoteApiTrainer<Options extends object = ClassOptions> = BaseTrainer<Options>;

/** @deprecated Renamed {@link CrossEntropyTrainer}; the old name goes in the next minor version. */
export const RemoteApiCrossEntropyTrainer = CrossEntropyTrainer;
/** @deprecated Renamed {@link CrossEntropyTrainer}; the old name goes in the next minor version. */
export type RemoteApiCrossEntropyTrainer = CrossEntropyTrainer;

/** @deprecated Renamed {@link GrpoTrainer}; the old name goes in the next minor version. */
export const RemoteApiGrpoTrainer = GrpoTrainer;
/** @deprecated Renamed {@link GrpoTrainer}; the old name goes in the next minor version. */
export type RemoteApiGrpoTrainer<Options extends object = ClassOptions> = GrpoTrainer<Options>;

/** @deprecated Renamed {@link OnPolicyDistillationTrainer}; the old name goes in the next minor version. */
export const RemoteApiOpdTrainer = OnPolicyDistillationTrainer;
/** @deprecated Renamed {@link OnPolicyDistillationTrainer}; the old name goes in the next minor version. */
export type RemoteApiOpdTrainer = OnPolicyDistillationTrainer;

/** @deprecated Renamed {@link PreferenceTrainer}; the old name goes in the next minor version. */
export const RemoteApiPreferenceTrainer = PreferenceTrainer;
/** @deprecated Renamed {@link PreferenceTrainer}; the old name goes in the next minor version. */
export type RemoteApiPreferenceTrainer = PreferenceTrainer;

/** @deprecated Renamed {@link DpoTrainer}; the old name goes in the next minor version. */
export const RemoteApiDpoTrainer = DpoTrainer;
/** @deprecated Renamed {@link DpoTrainer}; the old name goes in the next minor version. */
export type RemoteApiDpoTrainer = DpoTrainer;

/** @deprecated Renamed {@link RewardModelTrainer}; the old name goes in the next minor version. */
export const RemoteApiRewardModelTrainer = RewardModelTrainer;
/** @deprecated Renamed {@link RewardModelTrainer}; the old name goes in the next minor version. */
export type RemoteApiRewardModelTrainer = RewardModelTrainer;
