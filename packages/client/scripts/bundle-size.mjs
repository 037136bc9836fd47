// Prints what the client adds to a browser bundle: its built ESM (dist) bundled by esbuild for the browser,
// minified, then gzipped. tRPC is left out (external): an app using the link ships it anyway.
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const { outputFiles } = await build({
  entryPoints: [new URL('../dist/index.js', import.meta.url).pathname],
  bundle: true,
  minify: true,
  format: 'esm',
  platform: 'browser',
  external: ['@trpc/client', '@trpc/server'],
  write: false,
  outfile: 'client.js',
});
const code = outputFiles[0].contents;
console.log(`client bundle: ${code.length} B minified, ${gzipSync(code, { level: 9 }).length} B minified + gzip`);
