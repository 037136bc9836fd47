import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { build } from 'esbuild';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

const chromiumPath = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find(
  (candidate): candidate is string => !!candidate && existsSync(candidate),
);
if (!chromiumPath && (process.env.CI === 'true' || process.env.CI === '1')) {
  throw new Error('CI is set but no Chromium was found: install Debian `chromium` or point CHROMIUM_PATH at one.');
}

/** The test page bundled as a development or a production build, the way an app's bundler would. */
async function bundle(nodeEnv: 'development' | 'production'): Promise<string> {
  const result = await build({
    entryPoints: [path.join(import.meta.dirname, '__tests__/hook-page.ts')],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    define: { 'process.env.NODE_ENV': JSON.stringify(nodeEnv) },
    logLevel: 'silent',
  });
  return result.outputFiles[0]!.text;
}

/**
 * The README's "Paying" example as written, bundled over `__tests__/checkout-harness.ts`, which gives it what it
 * takes from the app around it (`useTRPC`, `router`, `fmt`, …).
 */
async function bundleReadmeExample(): Promise<string> {
  const readme = readFileSync(path.join(import.meta.dirname, '../README.md'), 'utf8');
  const example = /## Paying\n\n```tsx\n([\s\S]*?)```/.exec(readme)?.[1];
  if (!example) throw new Error('README.md has no tsx block under "## Paying"');
  const result = await build({
    stdin: {
      contents: [
        "import { fmt, mount, pendingCalls, router, useTRPC, useTRPCClient } from './checkout-harness.js';",
        example,
        'mount(Checkout);',
      ].join('\n'),
      loader: 'tsx',
      resolveDir: path.join(import.meta.dirname, '__tests__'),
      sourcefile: 'README-paying.tsx',
    },
    alias: { '@trpc-idempotency/react': path.join(import.meta.dirname, 'index.ts') },
    jsx: 'automatic',
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    define: { 'process.env.NODE_ENV': '"development"' },
    logLevel: 'silent',
  });
  return result.outputFiles[0]!.text;
}

type State = {
  status: string;
  key: string | null;
  earlier: { status: string; key: string } | null;
  unknown: boolean;
};
type Input = { amountCents: number; description: string };

describe.skipIf(!chromiumPath)('useIdempotentMutation in React 19 (StrictMode) in Chromium', () => {
  let server: Server;
  let browser: Browser;
  let origin: string;
  const bundles = new Map<string, string>();

  beforeAll(async () => {
    bundles.set('development', await bundle('development'));
    bundles.set('production', await bundle('production'));
    bundles.set('readme', await bundleReadmeExample());
    server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const js = bundles.get(url.pathname.slice(1).replace(/\.js$/, ''));
      if (js) return void res.writeHead(200, { 'content-type': 'text/javascript' }).end(js);
      const build = url.searchParams.get('build') ?? 'development';
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(`<!doctype html><div id="root"></div><script type="module" src="/${build}.js"></script>`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: chromiumPath,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    server?.close();
  });

  async function open(query: string): Promise<{ page: Page; warnings: string[] }> {
    const page = await (await browser.newContext()).newPage();
    const warnings: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'warning' || message.type() === 'error') warnings.push(message.text());
    });
    page.on('pageerror', (error) => warnings.push(`pageerror: ${error.message}`));
    await page.goto(`${origin}/?${query}`);
    await page.locator(query.includes('build=readme') ? 'button' : '#state').waitFor();
    return { page, warnings };
  }

  const state = async (page: Page): Promise<State> => JSON.parse((await page.locator('#state').textContent()) ?? '{}');
  const settled = async (page: Page): Promise<State> => {
    await expect.poll(async () => (await state(page)).status).toMatch(/success|error/);
    return state(page);
  };
  const mutate = (page: Page, input: Input) => page.evaluate((i) => (window as any).hook.mutate(i), input);
  const sent = (page: Page) =>
    page.evaluate(() =>
      (window as any).hook.server.attempts.map((op: any) => [op.context.idempotencyKey, op.input.amountCents]),
    );
  const rows = (page: Page, global = 'hook') =>
    page.evaluate((g) => (window as any)[g].server.ledger.length as number, global);
  const pay = { amountCents: 4000, description: 'Train ticket' };

  test('warns in a development build when the mutation or QueryClient sets retry, never in production', async () => {
    const retryWarning = /retry.*is ignored and set to 0/;
    for (const [query, warns] of [
      ['build=development&retry', true],
      ['build=development&defaultRetry', true],
      ['build=development', false],
      ['build=production&retry', false],
    ] as const) {
      const { page, warnings } = await open(query);
      await page.waitForTimeout(200); // effects have run
      expect(
        warnings.some((w) => retryWarning.test(w)),
        `${query}: ${warnings.join('\n')}`,
      ).toBe(warns);
      await page.close();
    }
  });

  test('retry stays 0 even when set: the link is the only layer that retries (2 attempts, not 2 × 3)', async () => {
    const { page } = await open('retry&lose=5');
    await mutate(page, pay);
    expect((await settled(page)).status).toBe('error');
    expect(await sent(page)).toHaveLength(2);
  });

  test('a double mutate sends one key; the key is spent by the answer', async () => {
    const { page, warnings } = await open('');
    // Both in one task, as a double click lands while the first is in flight.
    await page.evaluate((i) => {
      (window as any).hook.mutate(i);
      (window as any).hook.mutate(i);
    }, pay);
    expect((await settled(page)).status).toBe('success');
    await expect.poll(() => sent(page)).toHaveLength(2);
    const [[a], [b]] = await sent(page);
    expect(a).toBe(b);
    expect(await rows(page)).toBe(1);
    expect((await state(page)).key).toBeNull();
    expect(warnings).toEqual([]);
  });

  test('after the link gave up the key stays on screen, "try again" reuses it: one ledger row', async () => {
    const { page } = await open('lose=2');
    await mutate(page, pay);
    const unknown = await settled(page);
    expect(unknown.status).toBe('error');
    expect(unknown.key).toMatch(/^[0-9a-f-]{36}$/);
    await mutate(page, pay);
    await expect.poll(async () => (await state(page)).status).toBe('success');
    expect(new Set((await sent(page)).map(([key]: [string]) => key))).toEqual(new Set([unknown.key]));
    expect(await rows(page)).toBe(1);
  });

  // idempotency.earlier says the earlier one went through.
  test('a changed input after an unknown outcome is not sent once the earlier one went through', async () => {
    const { page } = await open('lose=2');
    await mutate(page, pay);
    const first = await settled(page);
    await mutate(page, { ...pay, amountCents: 4100 });
    await expect.poll(async () => (await state(page)).earlier?.status).toBe('succeeded');
    await expect.poll(async () => (await state(page)).status).toBe('error');
    expect(await state(page)).toMatchObject({ key: null, earlier: { key: first.key } });
    expect(await sent(page)).toEqual([
      [first.key, 4000],
      [first.key, 4000],
      [first.key, 4000],
    ]);
    expect(await rows(page)).toBe(1);
  });

  describe("the README's Paying example, as written", () => {
    const button = (page: Page) => page.locator('button');
    const amounts = (page: Page) =>
      page.evaluate(() => (window as any).checkout.server.attempts.map((op: any) => op.input.amountCents));
    const edit = (page: Page, amountCents: number) =>
      page.evaluate(
        (a) => (window as any).checkout.setInput({ amountCents: a, description: 'Train ticket' }),
        amountCents,
      );
    const loseNext = (page: Page, n: number) =>
      page.evaluate((count) => {
        (window as any).checkout.network.lose = count;
      }, n);

    test('says "could not confirm the payment" for a lost answer, and pays once on "Try again"', async () => {
      const { page, warnings } = await open('build=readme&lose=2');
      await button(page).click();
      await expect.poll(() => button(page).textContent()).toBe('We could not confirm the payment. Try again');
      await button(page).click();
      await expect.poll(() => page.evaluate(() => (window as any).checkout.visited)).toEqual(['/thanks']);
      expect(await amounts(page)).toEqual([4000, 4000, 4000]);
      expect(warnings).toEqual([]);
    });

    // Never "could not confirm the payment".
    test('after an edit, says the earlier payment is unconfirmed and the new amount unsent', async () => {
      const { page } = await open('build=readme&lose=2');
      await button(page).click();
      await expect.poll(() => button(page).textContent()).toMatch(/could not confirm the payment/);
      await loseNext(page, 2); // still offline when the edited amount is submitted
      await edit(page, 4100);
      await button(page).click();
      await expect
        .poll(() => button(page).textContent())
        .toBe('We could not confirm your earlier payment, so $41.00 was not sent. Try again');
      expect(await amounts(page)).not.toContain(4100);
      // Back online: the earlier one turns out to have gone through, and $41.00 waits for the user.
      await button(page).click();
      await expect
        .poll(() => button(page).textContent())
        .toBe('Your payment of $40.00 went through. Pay $41.00 as well');
      expect(await amounts(page)).not.toContain(4100);
      expect(await rows(page, 'checkout')).toBe(1);
      await button(page).click();
      await expect.poll(() => page.evaluate(() => (window as any).checkout.visited)).toEqual(['/thanks']);
      expect((await amounts(page)).filter((a: number) => a === 4100)).toEqual([4100]);
      expect(await rows(page, 'checkout')).toBe(2);
    });
  });

  for (const store of ['localStorage', 'indexedDB'] as const) {
    // Alice's own resume() then sends it, once.
    test(`${store}: a "try again" after another user signed in sends nothing under them`, async () => {
      const { page } = await open(`lose=1&store=${store}&user=alice&signInDuring=bob`);
      const sentAs = () => page.evaluate(() => [...(window as any).hook.sentAs]);
      await mutate(page, pay);
      const unknown = await settled(page);
      expect(unknown).toMatchObject({ status: 'error', unknown: true });
      expect(await sentAs()).toEqual(['alice']);

      // Bob sees "could not confirm the payment. Try again" and presses it: alice's call is not his to send.
      await mutate(page, pay);
      await expect.poll(async () => (await state(page)).status).toBe('error');
      await expect.poll(async () => (await state(page)).key).toBe(unknown.key);
      expect(await state(page)).toMatchObject({ unknown: true });
      expect(await sentAs()).toEqual(['alice']);
      expect(await page.evaluate(async () => (await (window as any).hook.pending.list()).length)).toBe(0);

      // A reload (bob still signed in) keeps it alice's: a send under her key is refused before anything goes out.
      await page.goto(`${origin}/?store=${store}&user=bob`);
      await page.locator('#state').waitFor();
      const refused = await page.evaluate(async (key) => {
        const { client } = (window as any).hook;
        return client.payments.create
          .mutate({ amountCents: 4000, description: 'Train ticket' }, { context: { idempotencyKey: key } })
          .then(
            () => 'sent',
            (error: any) => error.cause?.name,
          );
      }, unknown.key);
      expect([refused, await sentAs()]).toEqual(['IdentityChangedError', []]);

      // Alice signs in again: resume() sends it under her, once.
      await page.goto(`${origin}/?store=${store}&user=alice`);
      await page.locator('#state').waitFor();
      const resumed = await page.evaluate(async () => {
        const { pending, client } = (window as any).hook;
        return (await pending.resume(client)).map((r: any) => [r.status, r.call.key]);
      });
      expect([resumed, await sentAs()]).toEqual([[['succeeded', unknown.key]], ['alice']]);
    });

    test(`a lost answer, then a 401 (signed out), keeps the key and ${store} record: "could not confirm"`, async () => {
      const { page } = await open(`lose=1&refuse=1&store=${store}`);
      await mutate(page, pay);
      const refused = await settled(page);
      expect(refused).toMatchObject({ status: 'error', unknown: true });
      expect(refused.key).toMatch(/^[0-9a-f-]{36}$/);
      const listed = await page.evaluate(async () =>
        (await (window as any).hook.pending.list()).map((c: any) => c.key),
      );
      expect(listed).toEqual([refused.key]);

      // Signed in again: resume() re-sends the call under its key and reports the one payment, replayed.
      const resumed = await page.evaluate(async () => {
        const { pending, client } = (window as any).hook;
        return (await pending.resume(client)).map((r: any) => [r.status, r.call.key, r.replayed]);
      });
      expect(resumed).toEqual([['succeeded', refused.key, true]]);
      expect(await rows(page)).toBe(1);
      // "Try again" after the user saw "could not confirm" reuses the key: still one payment.
      await mutate(page, pay);
      await expect.poll(async () => (await state(page)).status).toBe('success');
      expect(new Set((await sent(page)).map(([key]: [string]) => key))).toEqual(new Set([refused.key]));
      expect(await rows(page)).toBe(1);
    });
  }
});
