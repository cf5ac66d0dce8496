/**
 * Choosing the next token from logits: greedy at temperature 0, otherwise a draw from the
 * temperature-scaled distribution restricted by top-k and then top-p (nucleus), as vLLM does.
 *
 * @module
 * @internal
 */
import type { Rng } from "./prng.js";

/** The filters of one draw. */
export interface ChoiceParams {
  /** 0 means greedy (argmax, lowest id on ties). */
  temperature: number;
  /** Keep only the k most likely tokens; 0 or −1 keeps all. */
  topK: number;
  /** Keep the smallest set of most likely tokens whose probability reaches topP; 1 keeps all. */
  topP: number;
}

/** Draws token ids from logits, reusing its buffers across calls. */
export class TokenChooser {
  private readonly weights: Float64Array;
  private readonly order: Int32Array;

  constructor(private readonly vocabSize: number) {
    this.weights = new Float64Array(vocabSize);
    this.order = new Int32Array(vocabSize);
  }

  /** The chosen token id. */
  choose(logits: Float32Array, params: ChoiceParams, rng: Rng): number {
    const V = this.vocabSize;
    let best = 0;
    for (let v = 1; v < V; v++) if (logits[v]! > logits[best]!) best = v;
    if (params.temperature === 0) return best;
    const max = logits[best]!;
    const w = this.weights;
    let total = 0;
    for (let v = 0; v < V; v++) {
      w[v] = Math.exp((logits[v]! - max) / params.temperature);
      total += w[v]!;
    }
    const filterK = params.topK > 0 && params.topK < V;
    if (!filterK && params.topP >= 1) return drawFrom(w, null, V, total, rng);
    const order = this.order;
    for (let v = 0; v < V; v++) order[v] = v;
    order.sort((a, b) => w[b]! - w[a]! || a - b);
    let kept = filterK ? params.topK : V;
    let keptMass = 0;
    for (let i = 0; i < kept; i++) keptMass += w[order[i]!]!;
    if (params.topP < 1) {
      const target = params.topP * keptMass;
      let cum = 0;
      let i = 0;
      while (i < kept - 1 && cum + w[order[i]!]! < target) cum += w[order[i++]!]!;
      kept = i + 1;
      keptMass = cum + w[order[i]!]!;
    }
    return drawFrom(w, order, kept, keptMass, rng);
  }
}

/** Draws index `order[i]` (or `i`) for i < count with probability weights[·] / mass. */
function drawFrom(weights: Float64Array, order: Int32Array | null, count: number, mass: number, rng: Rng): number {
  let u = rng.next() * mass;
  for (let i = 0; i < count - 1; i++) {
    const id = order ? order[i]! : i;
    u -= weights[id]!;
    if (u < 0) return id;
  }
  return order ? order[count - 1]! : count - 1;
}
