/**
 * {@link ExternalAgents}: tasks offered to agents running in other processes. They claim a task
 * (`POST /tasks/claim`), run it through the rollout's gateway URL, and push the finished episode
 * (`POST /trajectories`), which completes the rollout that offered it.
 * @module
 */
import type { RolloutTask } from "../contracts/task.js";
import { parsePush, type PushedEpisode, type PushRules } from "./push.js";
import type { RolloutSession } from "./session.js";
import { ProtocolError } from "../errors.js";

/** What a claim answers. */
export interface ClaimedTask {
  /** The rollout to run the task in. */
  rollout_id: string;
  /** Its OpenAI-compatible base URL (ends in `/v1`). */
  base_url: string;
  /** The model name to send. */
  model: string;
  /** The task. */
  task: { data: unknown; prompt: unknown; index: number; group_id: string; run_id: number; is_val: boolean };
}

interface Offer {
  session: RolloutSession;
  claim: ClaimedTask;
  rules: PushRules;
  claimed: boolean;
  resolve(push: PushedEpisode): void;
}

interface Waiter {
  give(claim: ClaimedTask): void;
}

/** Tasks waiting for an external agent, claims waiting for a task, and pushes completing them. */
export class ExternalAgents {
  private readonly offers = new Map<string, Offer>();
  private readonly queue: Offer[] = [];
  private readonly waiters: Waiter[] = [];

  /**
   * Offers `task`, to be run in `session`; resolves with the episode an external agent pushes.
   * Withdraw it with {@link ExternalAgents.withdraw} when the rollout ends first.
   */
  offer(session: RolloutSession, task: RolloutTask, model: string, rules: PushRules): Promise<PushedEpisode> {
    return new Promise((resolve) => {
      const claim: ClaimedTask = {
        rollout_id: session.id,
        base_url: session.baseURL,
        model,
        task: {
          data: task.data,
          prompt: task.prompt,
          index: task.index,
          group_id: task.groupId,
          run_id: task.runId,
          is_val: task.isVal,
        },
      };
      const offer: Offer = { session, claim, rules, claimed: false, resolve };
      this.offers.set(session.id, offer);
      const waiter = this.waiters.shift();
      if (waiter) this.hand(offer, waiter);
      else this.queue.push(offer);
    });
  }

  /** Forgets the offer of `rolloutId` (a later push is answered 404). */
  withdraw(rolloutId: string): void {
    const offer = this.offers.get(rolloutId);
    if (!offer) return;
    this.offers.delete(rolloutId);
    const at = this.queue.indexOf(offer);
    if (at >= 0) this.queue.splice(at, 1);
  }

  /** The next task offered, waiting up to `waitMs` for one (undefined when none came, or `signal` aborted). */
  claim(waitMs: number, signal: AbortSignal): Promise<ClaimedTask | undefined> {
    const offer = this.queue.shift();
    if (offer) {
      offer.claimed = true;
      return Promise.resolve(offer.claim);
    }
    return new Promise((resolve) => {
      const done = (claim: ClaimedTask | undefined) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", cancel);
        const at = this.waiters.indexOf(waiter);
        if (at >= 0) this.waiters.splice(at, 1);
        resolve(claim);
      };
      const waiter: Waiter = { give: done };
      const cancel = () => done(undefined);
      const timer = setTimeout(cancel, waitMs);
      signal.addEventListener("abort", cancel, { once: true });
      this.waiters.push(waiter);
    });
  }

  /**
   * Completes the rollout `rolloutId` with a pushed episode.
   * @throws {@link ProtocolError} 404 for a rollout with no offer, 409 for an offer not claimed yet, 400 for an invalid body.
   */
  push(rolloutId: string, body: unknown): PushedEpisode {
    const offer = this.offers.get(rolloutId);
    if (!offer) {
      throw new ProtocolError(
        `rollout \`${rolloutId}\` is not waiting for a pushed episode: it is unknown, finished, or runs its agent in-process; claim tasks with POST /tasks/claim`,
        { status: 404, code: "rollout_not_found", openaiType: "invalid_request_error", param: "rollout_id" },
      );
    }
    if (!offer.claimed)
      throw new ProtocolError(`rollout \`${rolloutId}\` has not been claimed; claim it with POST /tasks/claim first`, {
        status: 409,
        code: "rollout_not_claimed",
        openaiType: "invalid_request_error",
        param: "rollout_id",
      });
    const episode = parsePush(body, offer.rules);
    this.offers.delete(rolloutId);
    offer.resolve(episode);
    return episode;
  }

  private hand(offer: Offer, waiter: Waiter): void {
    offer.claimed = true;
    waiter.give(offer.claim);
  }
}
