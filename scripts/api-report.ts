/**
 * The API reports: one per entry point of the package (`nexrl` and each subpath), written by API
 * Extractor from the built declarations into `etc/*.api.md`. The reports are committed: a change
 * of the public surface shows in review as a change of them.
 *
 *   npm run api:check    # (CI) fails when a report differs from what the build exports
 *   npm run api:update   # rewrites the reports after a deliberate change of the API
 *
 * Both need `npm run build` first. `api-extractor.json` holds the shared settings; each entry
 * point here only changes the declarations it starts from and the report's name.
 *
 * A public declaration may use a type another entry point exports (the root's `Trajectory`
 * takes `nexrl/wire`'s `Datum`): a user imports it from there. A type that a public declaration
 * uses and no entry point exports is an error (API Extractor's ae-forgotten-export), in every
 * entry point's report — unless only `@internal` declarations use it (users never reach those;
 * typedoc leaves them out too), or it is one of {@link INTENTIONALLY_NOT_EXPORTED}.
 */
import { Extractor, ExtractorConfig, ExtractorLogLevel, type ExtractorMessage } from "@microsoft/api-extractor";
import { readFileSync } from "node:fs";
import ts from "typescript";

/** Each entry point: its declarations in dist/, and the name of its report in etc/. */
const ENTRY_POINTS = [
  { types: "dist/index.d.ts", report: "nexrl" },
  { types: "dist/entries/wire.d.ts", report: "nexrl-wire" },
  { types: "dist/entries/backends.d.ts", report: "nexrl-backends" },
  { types: "dist/entries/algorithms.d.ts", report: "nexrl-algorithms" },
  { types: "dist/agent/index.d.ts", report: "nexrl-agent" },
  { types: "dist/entries/runs.d.ts", report: "nexrl-runs" },
  { types: "dist/entries/errors.d.ts", report: "nexrl-errors" },
  { types: "dist/engine/index.d.ts", report: "nexrl-engine" },
  { types: "dist/server/index.d.ts", report: "nexrl-server" },
  { types: "dist/testing/index.d.ts", report: "nexrl-testing" },
];

const project = new URL("..", import.meta.url).pathname;

/**
 * Internal values a public type is computed from, as in typedoc.json's `intentionallyNotExported`:
 * `RecipeConfig` is `z.output<typeof recipeSchema>`; the schema's own type, written out, is
 * some 1,400 lines of zod generics that would say nothing to a user.
 */
const INTENTIONALLY_NOT_EXPORTED = new Set(["recipeSchema"]);

/** Whether the declaration at `line`:`column` of the declaration file (1-based) is inside an `@internal` one. */
function usedInternally(file: string, line: number, column: number): boolean {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const position = source.getPositionOfLineAndCharacter(line - 1, column - 1);
  const innermost = (node: ts.Node): ts.Node =>
    node.getChildren(source).find((child) => child.getStart(source) <= position && position < child.getEnd()) ===
    undefined
      ? node
      : innermost(
          node.getChildren(source).find((child) => child.getStart(source) <= position && position < child.getEnd())!,
        );
  for (let node: ts.Node | undefined = innermost(source); node !== undefined; node = node.parent)
    if (ts.getJSDocTags(node).some((tag) => tag.tagName.text === "internal")) return true;
  return false;
}

/**
 * Every name some entry point exports, each with the declaration it stands for (file and name),
 * so that a name two entry points export must be the same symbol.
 */
function exportedNames(): Map<string, string> {
  const files = ENTRY_POINTS.map((entry) => project + entry.types);
  const program = ts.createProgram(files, {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
  });
  const checker = program.getTypeChecker();
  const names = new Map<string, string>();
  for (const file of files) {
    const module = checker.getSymbolAtLocation(program.getSourceFile(file)!)!;
    for (const exported of checker.getExportsOfModule(module)) {
      const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const declaration = target.declarations?.[0];
      const where = `${declaration?.getSourceFile().fileName ?? "?"}#${target.name}`;
      const known = names.get(exported.name);
      if (known !== undefined && known !== where)
        throw new Error(`two entry points export different symbols named ${exported.name}: ${known} and ${where}`);
      names.set(exported.name, where);
    }
  }
  return names;
}

const update = process.argv.includes("--update");
const configFile = new URL("../api-extractor.json", import.meta.url).pathname;
const base = ExtractorConfig.loadFile(configFile);
const exported = exportedNames();
const failed: string[] = [];
const forgotten: string[] = [];
for (const entry of ENTRY_POINTS) {
  const config = ExtractorConfig.prepare({
    configObject: {
      ...base,
      mainEntryPointFilePath: `<projectFolder>/${entry.types}`,
      apiReport: { ...base.apiReport!, enabled: true, reportFileName: entry.report },
      messages: {
        ...base.messages,
        extractorMessageReporting: {
          ...base.messages?.extractorMessageReporting,
          // Judged below against every entry point, not written into the report.
          "ae-forgotten-export": { logLevel: ExtractorLogLevel.Warning, addToApiReportFile: false },
        },
      },
    },
    configObjectFullPath: configFile,
    packageJsonFullPath: new URL("../package.json", import.meta.url).pathname,
  });
  const messageCallback = (message: ExtractorMessage): void => {
    if (message.messageId !== "ae-forgotten-export") return;
    message.handled = true;
    message.logLevel = ExtractorLogLevel.None;
    const name = /The symbol "([^"]+)"/.exec(message.text)?.[1];
    const internal =
      message.sourceFilePath !== undefined &&
      usedInternally(message.sourceFilePath, message.sourceFileLine ?? 1, message.sourceFileColumn ?? 1);
    if (name === undefined || !(exported.has(name) || INTENTIONALLY_NOT_EXPORTED.has(name) || internal))
      forgotten.push(
        `${entry.report}: ${message.text} (${message.sourceFilePath ?? "?"}:${message.sourceFileLine ?? "?"})`,
      );
  };
  const result = Extractor.invoke(config, { localBuild: update, showVerboseMessages: false, messageCallback });
  if (!result.succeeded) failed.push(entry.report);
  else if (result.apiReportChanged) console.log(`etc/${entry.report}.api.md: updated`);
}
if (forgotten.length > 0)
  console.error(
    `public declarations use types that no entry point exports: export each from the entry point it belongs to (and document it), or stop using it in public signatures\n  ${forgotten.join("\n  ")}`,
  );
if (failed.length > 0)
  console.error(
    update
      ? `API Extractor reported problems for ${failed.join(", ")} (see above)`
      : `the public API differs from etc/ for ${failed.join(", ")}: if the change is deliberate, run npm run api:update and commit etc/`,
  );
if (forgotten.length > 0 || failed.length > 0) process.exit(1);
