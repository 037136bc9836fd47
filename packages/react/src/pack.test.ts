import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect, test } from 'vitest';

const packageDir = path.resolve(import.meta.dirname, '..');

test('npm pack ships dist as ESM, with react, React Query and tRPC as peers, and the tarball imports', async () => {
  if (!existsSync(path.join(packageDir, 'dist/index.js'))) {
    throw new Error('packages/react/dist is missing: run `npm run build` first (npm test does)');
  }
  // Unpacked under this package's node_modules, so the peers resolve from the workspace's.
  const out = path.join(packageDir, 'node_modules/.cache/pack-test');
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const [packed] = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', out], { cwd: packageDir, encoding: 'utf8' }),
  ) as { filename: string; files: { path: string }[] }[];
  const files = packed!.files.map((f) => f.path);
  expect(files).toContain('dist/index.js');
  expect(files).toContain('dist/index.d.ts');
  expect(files.filter((f) => /\.test(-d)?\.ts$|__tests__/.test(f))).toEqual([]);

  execFileSync('tar', ['-xzf', path.join(out, packed!.filename), '-C', out]);
  const manifest = JSON.parse(readFileSync(path.join(out, 'package/package.json'), 'utf8'));
  expect(manifest.type).toBe('module');
  expect(Object.keys(manifest.peerDependencies)).toEqual(
    expect.arrayContaining([
      'react',
      '@tanstack/react-query',
      '@trpc/tanstack-react-query',
      '@trpc-idempotency/client',
    ]),
  );
  expect(manifest.dependencies ?? {}).toEqual({});

  const entry = path.join(out, 'package', manifest.exports['.'].import);
  const mod = await import(pathToFileURL(entry).href);
  expect(Object.keys(mod).sort()).toEqual([
    'EarlierOutcomeUnknownError',
    'NewInputNotConfirmedError',
    'useIdempotentMutation',
    'useResumePendingCalls',
  ]);
});
