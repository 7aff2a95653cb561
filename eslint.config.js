// Lint rules for Arbor. The restricted-syntax rules enforce docs/architecture.md's first principle:
// core logic is driven by an injected Clock and Rng, never by wall time or global randomness.
// Exempt: the wall clock itself, the CLI shell, and benchmarks (which measure wall time on purpose).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

const clockAndRng = {
  "no-restricted-properties": [
    "error",
    { object: "Date", property: "now", message: "Use the injected Clock (core/clock.ts)." },
    { object: "Math", property: "random", message: "Use the injected Rng (core/rng.ts)." },
    { object: "performance", property: "now", message: "Use the injected Clock (core/clock.ts)." },
  ],
  "no-restricted-globals": [
    "error",
    { name: "setTimeout", message: "Use Clock.sleep / Clock.setTimer (core/clock.ts)." },
    { name: "setInterval", message: "Use Clock.setTimer (core/clock.ts)." },
  ],
  "no-restricted-syntax": [
    "error",
    { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: "Use the injected Clock." },
  ],
};

export default tseslint.config(
  { ignores: ["node_modules/**", ".arbor/**", "dist/**", "coverage/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: "readonly", console: "readonly", Buffer: "readonly", URL: "readonly" } },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  { files: ["**/*.cjs"], languageOptions: { sourceType: "commonjs", globals: { module: "writable", require: "readonly" } } },
  { files: ["src/**/*.ts"], ignores: ["src/**/*.test.ts", "src/core/real-clock.ts", "src/cli/**", "src/bench/**"], rules: clockAndRng },
);
