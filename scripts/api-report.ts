/**
 * The API reports: one per entry point of the package (`nexrl`, `nexrl/engine`, `nexrl/server`,
 * `nexrl/testing`), written by API Extractor from the built declarations into `etc/*.api.md`.
 * The reports are committed: a change of the public surface shows in review as a change of them.
 *
 *   npm run api:check    # (CI) fails when a report differs from what the build exports
 *   npm run api:update   # rewrites the reports after a deliberate change of the API
 *
 * Both need `npm run build` first. `api-extractor.json` holds the shared settings; each entry
 * point here only changes the declarations it starts from and the report's name.
 */
import { Extractor, ExtractorConfig, ExtractorLogLevel, type IExtractorMessagesConfig } from "@microsoft/api-extractor";

/** Each entry point: its declarations in dist/, and the name of its report in etc/. */
const ENTRY_POINTS = [
  { types: "dist/index.d.ts", report: "nexrl", root: true },
  { types: "dist/engine/index.d.ts", report: "nexrl-engine", root: false },
  { types: "dist/server/index.d.ts", report: "nexrl-server", root: false },
  { types: "dist/testing/index.d.ts", report: "nexrl-testing", root: false },
];

const update = process.argv.includes("--update");
const configFile = new URL("../api-extractor.json", import.meta.url).pathname;
const base = ExtractorConfig.loadFile(configFile);
const subpathMessages: IExtractorMessagesConfig = {
  ...base.messages,
  extractorMessageReporting: {
    ...base.messages?.extractorMessageReporting,
    "ae-forgotten-export": { logLevel: ExtractorLogLevel.None, addToApiReportFile: false },
  },
};
const failed: string[] = [];
for (const entry of ENTRY_POINTS) {
  const config = ExtractorConfig.prepare({
    configObject: {
      ...base,
      mainEntryPointFilePath: `<projectFolder>/${entry.types}`,
      apiReport: { ...base.apiReport!, enabled: true, reportFileName: entry.report },
      // A subpath's declarations use the root's types (Tokenizer, Datum, …), which users import
      // from "nexrl"; only the root report flags a public type that no entry point exports.
      ...(!entry.root && { messages: subpathMessages }),
    },
    configObjectFullPath: configFile,
    packageJsonFullPath: new URL("../package.json", import.meta.url).pathname,
  });
  const result = Extractor.invoke(config, { localBuild: update, showVerboseMessages: false });
  if (!result.succeeded) failed.push(entry.report);
  else if (result.apiReportChanged) console.log(`etc/${entry.report}.api.md: updated`);
}
if (failed.length > 0) {
  console.error(
    update
      ? `API Extractor reported problems for ${failed.join(", ")} (see above)`
      : `the public API differs from etc/ for ${failed.join(", ")}: if the change is deliberate, run npm run api:update and commit etc/`,
  );
  process.exit(1);
}
