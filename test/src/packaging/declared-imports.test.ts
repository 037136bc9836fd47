import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { findUndeclaredImports } from './declared-imports.ts';

const repository = join(dirname(fileURLToPath(import.meta.url)), '../../..');

describe('declared imports', () => {
  it('finds every package each workspace imports declared in its package.json (hoisting hides what is not)', () => {
    expect(findUndeclaredImports(repository)).toEqual([]);
  });
});

describe('the declared-imports check', () => {
  const root = mkdtempSync(join(tmpdir(), 'declared-imports-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  };
  const json = (value: unknown) => JSON.stringify(value);
  write('package.json', json({ private: true, workspaces: ['packages/*', 'app'], devDependencies: { vitest: '4' } }));
  write(
    'packages/lib/package.json',
    json({
      name: '@x/lib',
      dependencies: { '@trpc/server': '11' },
      peerDependencies: { kysely: '0' },
      devDependencies: { zod: '4', '@types/pg': '8', '@types/scoped__pkg': '1' },
    }),
  );
  write('app/package.json', json({ name: 'app', private: true, dependencies: { next: '16' } }));
  write('app/tsconfig.json', '{ // comments are allowed\n "compilerOptions": { "paths": { "@/*": ["./src/*"] } } }');

  const check = (workspace: 'packages/lib' | 'app', file: string, text: string) => {
    write(`${workspace}/${file}`, text);
    try {
      return findUndeclaredImports(root).map(({ specifier, problem }) => `${specifier}: ${problem}`);
    } finally {
      rmSync(join(root, workspace, file));
    }
  };

  it('accepts declared packages, their subpaths, builtins, relative paths, aliases and the workspace itself', () => {
    const lib = `
      import { initTRPC } from '@trpc/server';
      import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
      import type { Kysely } from 'kysely';
      import { readFileSync } from 'node:fs';
      import { join } from 'path';
      import { helper } from './helper.js';
      import internal from '#internal';
      export * from '@x/lib/extra';
      const url = import('data:text/javascript,export default 1');`;
    expect(check('packages/lib', 'src/index.ts', lib)).toEqual([]);
    const test = `import { z } from 'zod'; import { it } from 'vitest';
      import type { Pool } from 'pg'; import type { Thing } from '@scoped/pkg';`;
    expect(check('packages/lib', 'src/index.test.ts', test)).toEqual([]);
    expect(check('packages/lib', 'src/__tests__/a.ts', test)).toEqual([]);
    expect(check('app', 'page.tsx', `import Link from 'next/link'; import { x } from '@/components/x';`)).toEqual([]);
  });

  it.each([
    ['a static import', `import { a } from 'left-pad';`],
    ['an import for its side effects', `import 'left-pad';`],
    ['a re-export', `export { a } from 'left-pad/sub';`],
    ['a type-only import', `import type { A } from 'left-pad';`],
    ['an import of types only', `import { type A } from 'left-pad';`],
    ['a dynamic import', `const m = await import('left-pad');`],
    ['a require', `const m = require('left-pad');`],
    ['require.resolve', `const p = require.resolve('left-pad/package.json');`],
    ['createRequire(…).resolve', `const p = createRequire(import.meta.url).resolve('left-pad');`],
    ['import.meta.resolve', `const p = import.meta.resolve('left-pad');`],
    ['an import type', `let a: typeof import('left-pad');`],
    ['a types reference', `/// <reference types="left-pad" />\nexport {};`],
  ])('refuses an undeclared package in %s, in any workspace', (_, text) => {
    expect(check('packages/lib', 'src/a.ts', text)).toEqual([`${text.match(/left-pad[^'"]*/)?.[0]}: undeclared`]);
    expect(check('app', 'a.tsx', text)).toHaveLength(1);
  });

  it('refuses a value import that only @types declares, and a dev-only package in shipped code', () => {
    expect(check('packages/lib', 'src/a.ts', `import pg from 'pg';`)).toEqual(['pg: undeclared']);
    expect(check('packages/lib', 'src/a.ts', `import { z } from 'zod';`)).toEqual(['zod: dev-only in shipped code']);
    // Its declarations name the types: where it is installed, they must be there too.
    expect(check('packages/lib', 'src/a.ts', `import type { Pool } from 'pg';`)).toEqual([
      'pg: dev-only in shipped code',
    ]);
    expect(check('packages/lib', 'src/a.ts', `import { it } from 'vitest';`)).toEqual([
      'vitest: dev-only in shipped code',
    ]);
    // A private workspace ships nothing: a devDependency is as good as any there.
    expect(check('app', 'a.ts', `import { it } from 'vitest';`)).toEqual([]);
  });
});
