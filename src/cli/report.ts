/**
 * `nexrl report RUN_DIR [--output FILE] [--open] [--watch]`.
 * @module
 */
import { spawn } from "node:child_process";
import { EXIT_CODES } from "./args.js";
import type { ReportCommand } from "./after-run-args.js";
import type { CliIO } from "./io.js";

/** The command that opens a file or URL in the user's browser on this platform. */
function openerCommand(platform: NodeJS.Platform = process.platform): { command: string; args: string[] } {
  if (platform === "darwin") return { command: "open", args: [] };
  if (platform === "win32") return { command: "cmd", args: ["/c", "start", '""'] };
  return { command: "xdg-open", args: [] };
}

/**
 * Opens `target` with the platform's opener; resolves false when there is none (or it fails),
 * so the caller prints the path instead.
 */
function openInBrowser(target: string, env: Readonly<Record<string, string | undefined>>): Promise<boolean> {
  const { command, args } = openerCommand();
  return new Promise((resolve) => {
    const child = spawn(command, [...args, target], { stdio: "ignore", detached: true, env: { ...env } });
    child.once("error", () => resolve(false));
    child.once("spawn", () => {
      child.unref();
      resolve(true);
    });
  });
}

/** Resolves on the first SIGINT or SIGTERM. */
function stopSignal(): Promise<void> {
  return new Promise((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
  });
}

/**
 * Runs `nexrl report`: writes the HTML file and prints its path, or with `--watch` serves it on
 * 127.0.0.1 until `stop` resolves (by default SIGINT or SIGTERM).
 */
export async function runReport(command: ReportCommand, io: CliIO, stop?: Promise<void>): Promise<number> {
  const source = { cwd: io.cwd, env: io.env };
  const open = async (target: string): Promise<void> => {
    if (!command.open) return;
    if (!(await openInBrowser(target, io.env)))
      io.stderr.write(`nexrl report: no browser opener found (${openerCommand().command}); open ${target} yourself\n`);
  };
  if (command.watch) {
    const { serveReport } = await import("../report/watch.js");
    const previous = process.listeners("SIGINT");
    process.removeAllListeners("SIGINT");
    const server = await serveReport(command.runDir, {
      ...source,
      port: command.port,
      intervalMs: command.intervalMs,
      ...(command.allowedHosts && { allowedHosts: command.allowedHosts }),
      ...(command.corsOrigins && { corsOrigins: command.corsOrigins }),
    });
    try {
      io.stdout.write(`nexrl report: serving ${server.url} (redrawn as the run writes; stop with Ctrl-C)\n`);
      await open(server.url);
      await (stop ?? stopSignal());
    } finally {
      await server.close();
      for (const listener of previous) process.on("SIGINT", listener as () => void);
    }
    return EXIT_CODES.ok;
  }
  const { writeReport } = await import("../report/report.js");
  const file = await writeReport(command.runDir, {
    ...source,
    ...(command.output !== undefined && { output: command.output }),
  });
  io.stdout.write(`${file}\n`);
  await open(file);
  return EXIT_CODES.ok;
}
