// What the report page's script finds on `window`: uPlot (inlined before it) and its own state.
declare const uPlot: typeof import("uplot").default;
interface Window {
  nexrlReport: unknown;
}
