import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { findLongLines } from './line-length.ts';

const repository = join(dirname(fileURLToPath(import.meta.url)), '../../..');

describe('line length', () => {
  it('finds no line past 120 columns in packages/*/src', () => {
    expect(findLongLines(repository)).toEqual([]);
  });
});

describe('the line-length check', () => {
  const root = mkdtempSync(join(tmpdir(), 'line-length-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  };

  it('reports each line past 120 code points in any package source, tests included, and nothing else', () => {
    write('packages/a/src/ok.ts', `${'x'.repeat(120)}\n// ${'—'.repeat(117)}\r\n`);
    write('packages/a/src/deep/long.test.ts', `const a = 1;\n${'y'.repeat(121)}\n`);
    write('packages/b/src/long.tsx', `// ${'µ'.repeat(118)}`);
    write('packages/b/README.md', 'z'.repeat(200));
    write('packages/b/dist/long.js', 'z'.repeat(200));
    write('apps/c/src/long.ts', 'z'.repeat(200));
    expect(findLongLines(root)).toEqual([
      { file: 'packages/a/src/deep/long.test.ts', line: 2, columns: 121 },
      { file: 'packages/b/src/long.tsx', line: 1, columns: 121 },
    ]);
  });
});
