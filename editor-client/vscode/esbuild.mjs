// Bundles the extension and vscode-languageclient into one file (vsce packages no node_modules).
import { build } from 'esbuild';

await build({
  entryPoints: ['src/extension.ts'],
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  external: ['vscode'],
  outfile: 'dist/extension.js',
  sourcemap: false,
  minify: process.argv.includes('--minify'),
  logLevel: 'info',
});
