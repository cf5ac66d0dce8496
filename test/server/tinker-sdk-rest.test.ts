import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { server } from "../support/server.js";

/**
 * The official Tinker SDK's RestClient against nexrl serve (scripts/tinker-sdk-rest-check.py).
 * Runs when NEXRL_TINKER_SDK_PYTHON names a Python that imports the SDK (see
 * scripts/tinker-sdk-check.md); CI has no Python SDK, so it is skipped there.
 */
const python = process.env["NEXRL_TINKER_SDK_PYTHON"];

describe.skipIf(python === undefined)(
  "official Tinker SDK RestClient (0.25 or 0.19, whichever NEXRL_TINKER_SDK_PYTHON imports)",
  () => {
    it("lists, describes, archives and deletes checkpoints of a run made against nexrl serve", async () => {
      const running = await server({
        protocol: "tinker",
        apiKey: "tml-sdk-rest-check-key",
        tinkerClientConfig: { use_pyqwest_transport: false },
      });
      const { stdout } = await promisify(execFile)(python!, ["scripts/tinker-sdk-rest-check.py"], {
        env: { ...process.env, TINKER_BASE_URL: running.url, TINKER_API_KEY: "tml-sdk-rest-check-key" },
        timeout: 240_000,
      });
      expect(stdout).toMatch(/^ok: the archive \(\d+ bytes, gzipped tar\) holds/m);
      expect(stdout).toMatch(/^ok: delete_checkpoint: left/m);
      expect(stdout).toMatch(/^PASS: tinker SDK \d+\.\d+\.\d+ RestClient/m);
    }, 300_000);
  },
);
