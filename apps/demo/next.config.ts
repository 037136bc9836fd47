import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NextConfig } from 'next';

const monorepoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const nextConfig: NextConfig = {
  // PGlite loads its WebAssembly and data files from its own package folder at runtime: bundling breaks that.
  serverExternalPackages: ['@electric-sql/pglite'],
  // Dependencies are hoisted to the repository root (npm workspaces).
  turbopack: { root: monorepoRoot },
  outputFileTracingRoot: monorepoRoot,
  // `npm run typecheck` (Turborepo) already type-checks this app; checking again here only slows `npm run demo`.
  typescript: { ignoreBuildErrors: true },
};

export default nextConfig;
