import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    // The shared Postgres for the DATABASE_URL variant (DATABASE_URL, else Testcontainers, else embedded).
    globalSetup: ['../../tools/test-db/src/global-setup.ts'],
    // Each file starts its own `next start`, and may have to build first: one file at a time.
    fileParallelism: false,
    testTimeout: 300_000,
    // `next build` runs in beforeAll when no current build exists, and a fresh PGlite folder takes a while.
    hookTimeout: 900_000,
  },
});
