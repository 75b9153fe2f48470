// No `import { defineConfig } from "vite"`: the test runs the repository's own vite on a copy of
// this app, where only fuselm is installed. A plain object is a complete Vite config.
export default {
  build: { outDir: "dist", emptyOutDir: true },
};
