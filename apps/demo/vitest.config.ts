import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    testTimeout: 120_000,
    // `next build` runs in beforeAll when no current build exists: minutes on a small machine.
    hookTimeout: 900_000,
  },
});
