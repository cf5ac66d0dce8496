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
      // Just under the figures measured on a clean clone of main on 2026-12-01 after the day's merges (lines 95.12 %,
      // branches 88.53 %, statements 94.44 %, functions 94.58 %), with room for the few branches that depend on timing
      // (a retry taken or not): a change that lowers them fails CI.
      thresholds: { lines: 94.9, branches: 88.3, statements: 94.2, functions: 94.3 },
    },
  },
});
