// Bundles the dashboard's web UI (web/dashboard/: plain TypeScript, DOM, CSS) with Vite into one folder of
// static files, no CDN: `npm run build` writes dist/dashboard/, which `arbor run --dashboard` and `arbor serve
// dashboard` serve (src/cli/dashboard/dashboard-server.ts); the dashboard's tests build it into a temp folder.
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../web/dashboard/", import.meta.url));

/** Build the web UI into `outDir` (emptied first). Resolves when the bundle is written. */
export async function buildDashboard(outDir) {
  const { build } = await import("vite");
  await build({
    root,
    configFile: false,
    base: "./",
    logLevel: "warn",
    // CSS unminified: lightningcss, Vite's CSS minifier, is a native optional package .npmrc leaves out (the CSS is small).
    build: { outDir, emptyOutDir: true, sourcemap: false, reportCompressedSize: false, cssMinify: false },
  });
}
