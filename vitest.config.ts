import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    coverage: {
      provider: "v8",
      include: ["src/**/*.ts"],
      reporter: ["text-summary", "json-summary", "html"],
      reportsDirectory: "coverage",
      // Just under the figures of 2026-12-01 (lines 96.1 %, branches 91.1 %): a change that lowers them fails CI.
      thresholds: { lines: 95.5, branches: 90.5, statements: 95, functions: 95 },
    },
  },
});
