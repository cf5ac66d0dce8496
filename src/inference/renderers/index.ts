/**
 * nexrl's own chat renderers, for model families whose tokenizer has no usable chat template:
 * Llama 3.1–3.3 with tools and gpt-oss's Harmony.
 *
 * @module
 */
import { HarmonyRenderer } from "./harmony.js";
import { Llama3Renderer } from "./llama3.js";
import type { ChatRenderer, RendererId } from "./types.js";

export { RENDERER_IDS, type ChatRenderer, type RendererId } from "./types.js";
export { SAMPLED_COMPLETION } from "./sampled.js";

/** The renderer of a family. */
export function createRenderer(id: RendererId): ChatRenderer {
  return id === "llama3" ? new Llama3Renderer() : new HarmonyRenderer();
}
