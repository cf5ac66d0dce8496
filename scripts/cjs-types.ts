/**
 * Writes `dist/index.d.cts`, the types of `require("nexrl")`. The CommonJS entry
 * (`src/index.cts`) hands out the package's ES module at run time, so its types are the ES
 * module's: TypeScript (5.8+, `module: node20` or `nodenext`) lets CommonJS code require it.
 * `tsc` cannot write this file itself: the entry's own declaration says only `export = object`.
 *
 *   npm run build   # runs tsc, then this
 */
import { writeFileSync } from "node:fs";

const TYPES = `/** The types of \`require("nexrl")\`: the package's ES module, which the CommonJS entry hands out. */
export * from "./index.js";
`;

writeFileSync(new URL("../dist/index.d.cts", import.meta.url), TYPES);
