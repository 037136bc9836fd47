import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { STORE_CHECKS } from './__tests__/store-contract.js';

const chromiumPath = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find(
  (candidate): candidate is string => !!candidate && existsSync(candidate),
);
if (!chromiumPath && (process.env.CI === 'true' || process.env.CI === '1')) {
  throw new Error('CI is set but no Chromium was found: install Debian `chromium` or point CHROMIUM_PATH at one.');
}

/** Serves this folder's TypeScript as browser modules: `/x.js` is `x.ts` transpiled, nothing bundled. */
function serveStores(): Promise<Server> {
  const root = import.meta.dirname;
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/') {
      res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>stores</title>');
      return;
    }
    const file = path.join(root, url.pathname.replace(/\.js$/, '.ts'));
    if (!file.startsWith(root) || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
    });
    res.writeHead(200, { 'content-type': 'text/javascript' }).end(outputText);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

describe.skipIf(!chromiumPath)('the browser stores in Chromium', () => {
  let server: Server;
  let browser: Browser;
  let page: Page;
  let origin: string;

  beforeAll(async () => {
    server = await serveStores();
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: chromiumPath,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    page = await (await browser.newContext()).newPage();
    await page.goto(origin);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    server?.close();
  });

  /** Loads the stores and the contract into the page as `window.t`. */
  async function load(): Promise<void> {
    await page.addScriptTag({
      type: 'module',
      content: `
        import { localStorageStore } from '/local-storage-store.js';
        import { indexedDBStore } from '/indexed-db-store.js';
        import { storeContract } from '/__tests__/store-contract.js';
        window.t = { localStorageStore, indexedDBStore, storeContract };`,
    });
    await page.waitForFunction(() => 't' in window);
  }

  for (const name of ['localStorageStore', 'indexedDBStore'] as const) {
    test(`${name} passes every store check`, async () => {
      await load();
      const passed = await page.evaluate(async (factory) => {
        const t = (window as any).t;
        return t.storeContract(() => t[factory]());
      }, name);
      expect(passed).toEqual([...STORE_CHECKS]);
    });

    test(`${name} keeps a call across a page reload, under its user only`, async () => {
      await load();
      const call = {
        key: `reload-${name}`,
        path: 'payments.create',
        input: '{"json":{"amountCents":4000}}',
        firstSentAt: 7,
      };
      await page.evaluate(
        async ([factory, c]) => {
          const t = (window as any).t;
          await t[factory]().put('user:1', c);
        },
        [name, call] as const,
      );
      await page.reload();
      await load();
      const [mine, theirs] = await page.evaluate(async (factory) => {
        const t = (window as any).t;
        const store = t[factory]();
        const listed = [await store.list('user:1'), await store.list('user:2')];
        await store.clear('user:1');
        return listed;
      }, name);
      expect(mine).toEqual([call]);
      expect(theirs).toEqual([]);
    });
  }
});
