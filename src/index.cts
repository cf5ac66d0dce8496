/**
 * The package's CommonJS entry: what `require("nexrl")` gives. A user module in a CommonJS
 * project (a `.ts` file without `"type": "module"`) is compiled by tsx to CommonJS and requires
 * nexrl; loading the ES modules of `dist/` again through tsx's CommonJS loader would make a
 * second copy of nexrl and of undici, whose web classes then refuse to construct ("Illegal
 * constructor"). So when nexrl is already running in this process (the CLI, or a program that
 * loads recipes, registers itself before importing user modules), this entry hands out that very
 * module; otherwise it requires the ES module (Node >= 20.19 loads ES modules with `require`).
 */
const shared = (globalThis as Record<symbol, unknown>)[Symbol.for("nexrl.package")] as
  { version: string; module: object } | undefined;
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a CommonJS entry reads with require
const { version } = require("../package.json") as { version: string };
// eslint-disable-next-line @typescript-eslint/no-require-imports -- see above
export = shared !== undefined && shared.version === version ? shared.module : (require("./index.js") as object);
