// What the report page's script finds on `window`: uPlot (inlined before it) and its own state.
import type UPlot from "uplot";

declare global {
  const uPlot: typeof UPlot;
  interface Window {
    nexrlReport: unknown;
  }
}
