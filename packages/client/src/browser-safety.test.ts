import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';

/** Every file that ships to browsers: the package's sources minus its tests. */
function shippedSources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === '__tests__' ? [] : shippedSources(path);
    return /\.ts$/.test(entry.name) && !/\.test(-d)?\.ts$/.test(entry.name) ? [path] : [];
  });
}

test('the shipped code uses no Node-only API and imports nothing but the tRPC peers and the wire format', () => {
  const files = shippedSources(import.meta.dirname);
  expect(files.length).toBeGreaterThan(5);
  for (const file of files) {
    const code = readFileSync(file, 'utf8');
    const imports = [...code.matchAll(/from '([^']+)'/g)].map((m) => m[1]!);
    for (const specifier of imports) {
      const allowed =
        specifier.startsWith('.') || specifier.startsWith('@trpc/') || specifier === '@trpc-idempotency/wire';
      expect(allowed, `${file} imports ${specifier}`).toBe(true);
    }
    expect(code, file).not.toMatch(/\b(Buffer|process|require)\s*[.(]/);
  }
});
