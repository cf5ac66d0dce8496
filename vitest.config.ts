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
      // Just under the figures measured on main on 2026-12-02 (lines 94.00 %, branches 88.44 %, statements 93.09 %,
      // functions 93.60 %). Lines, statements and functions fell from 95.12/94.44/94.58 with the Redis reconnection code, which its tests
      // exercise in child processes (not measured), and the agent-SDK paths, whose tests run under Node 24 only.
      // A change that lowers them further fails CI.
      // Branches: 88.21 % measured on 2026-12-03 (711b358) after the engine's LoRA training and the new
      // kernels (their error and layout branches only partly reached); the threshold sits just under it.
      thresholds: { lines: 93.8, branches: 88.1, statements: 92.9, functions: 93.4 },
    },
  },
});
