// ESLint with typescript-eslint's type-aware rules; formatting is Prettier's job (eslint-config-prettier).
import js from "@eslint/js";
import prettier from "eslint-config-prettier";
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: [
      "dist/",
      "docs/",
      "coverage/",
      "node_modules/",
      "bench/tfjs/node_modules/",
      "bench/bullmq/node_modules/",
      "**/*.py",
      "test/tooling/fixtures/lint/",
      // Generated code (npm run proto) is kept byte for byte as generated.
      "src/wire/tinker-proto/*_pb.ts",
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      parserOptions: {
        project: ["./tsconfig.check.json", "./assets/report/tsconfig.json"],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/switch-exhaustiveness-check": ["error", { considerDefaultExhaustiveForUnions: true }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
    },
  },
  {
    // Spreading an array into a call puts every element on the stack: past ~100k elements (a long
    // prompt, a large dataset) it throws RangeError. src/wire/arrays.ts has appendAll, maxOf, minOf.
    files: ["src/**/*.ts"],
    rules: {
      "no-restricted-syntax": [
        "error",
        {
          selector: "CallExpression > SpreadElement, NewExpression > SpreadElement",
          message:
            "Spreading into a call overflows the stack for long arrays; use appendAll / maxOf / minOf from src/wire/arrays.ts, or a loop.",
        },
      ],
    },
  },
  {
    // Tests read loosely typed JSON answers from servers.
    files: ["test/**/*.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
  {
    files: ["**/*.js"],
    extends: [tseslint.configs.disableTypeChecked],
  },
  prettier,
);
