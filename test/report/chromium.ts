/** Debian's Chromium driven by playwright-core, for the report's browser tests; nothing is downloaded. */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { tempDir } from "../support/runs.js";

/**
 * The browser: `NEXRL_CHROMIUM`, else Debian's `/usr/bin/chromium` (scripts/ensure-chromium.sh
 * installs it), else the Google Chrome that GitHub's Ubuntu runners carry.
 */
export const chromiumPath =
  process.env.NEXRL_CHROMIUM ??
  ["/usr/bin/chromium", "/usr/bin/google-chrome"].find((p) => existsSync(p)) ??
  "/usr/bin/chromium";

/** Whether the browser is there; the browser tests skip, with a warning, when it is not. */
export const hasChromium = existsSync(chromiumPath);
if (!hasChromium)
  console.warn(
    `the report's browser tests are skipped: no Chromium at ${chromiumPath}. Install it with scripts/ensure-chromium.sh (Debian's chromium package), or point NEXRL_CHROMIUM at one.`,
  );

/** Flags for a closed network: without the background-networking ones, Chromium's own connections are refused here. */
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** A page and everything that went wrong on it: console errors, uncaught exceptions, network requests. */
export interface WatchedPage {
  page: Page;
  /** Console errors and uncaught exceptions. */
  errors: string[];
  /** URLs requested that are neither `file:` nor `data:` nor `allowedOrigin`. */
  network: string[];
  close(): Promise<void>;
}

/** Opens a fresh Chromium profile (its own user-data folder) with one page of 1280 × 900. */
export async function openPage(allowedOrigin?: string): Promise<WatchedPage> {
  const profile = join(await tempDir("nexrl-chromium-"), "profile");
  const context: BrowserContext = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    args: FLAGS,
    viewport: { width: 1280, height: 900 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors: string[] = [];
  const network: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  page.on("pageerror", (error) => errors.push(String(error)));
  page.on("request", (request) => {
    const url = request.url();
    if (!url.startsWith("file:") && !url.startsWith("data:") && !(allowedOrigin && url.startsWith(allowedOrigin)))
      network.push(url);
  });
  return { page, errors, network, close: () => context.close() };
}
