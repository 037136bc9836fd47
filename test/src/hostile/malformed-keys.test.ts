import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BACKENDS, countRows, keyRows } from '../harness/backends.ts';
import { PaymentsFixture } from '../harness/in-process-server.ts';
import { type CallResult, callBatchRaw, callRaw } from '../harness/trpc-http.ts';

const f = new PaymentsFixture();

const storedKeys = () => countRows(f.backend.db, 'idempotency_keys');

/**
 * A refused key: 400 `key_invalid` from the middleware, or Node's own 400/431 when its HTTP parser refuses
 * the bytes before tRPC runs (then the body is not tRPC's). Never a success, never a 5xx.
 */
function expectRefused(res: CallResult, label: string, reasons: string[] = ['key_invalid']) {
  expect([400, 431], `${label}: status ${res.status} ${res.body.slice(0, 200)}`).toContain(res.status);
  // Node's parser answers with an empty body; anything else is tRPC's answer and must say why.
  if (res.body !== '') expect(reasons, `${label}: ${res.body.slice(0, 300)}`).toContain(res.reason);
}

const echo = (key: string | Buffer, input: unknown = { n: 1 }, user = 'alice') =>
  callRaw({ port: f.server.port, path: 'payments.echo', input, key, user });

describe.each(BACKENDS)('malformed keys on %s', (backendName) => {
  f.use(backendName);

  describe('malformed Idempotency-Key headers', () => {
    const named: [label: string, header: string | Buffer, reasons?: string[]][] = [
      ['empty string item', '""'],
      ['empty raw value', '', ['key_invalid', 'key_missing']],
      ['only spaces', '   ', ['key_invalid', 'key_missing']],
      ['256 characters, quoted', `"${'k'.repeat(256)}"`],
      ['256 characters, raw', 'k'.repeat(256)],
      ['4 096 characters', 'k'.repeat(4096)],
      ['1 MB', 'k'.repeat(1024 * 1024)],
      ['tab inside a string', '"a\tb"'],
      ['NUL byte', 'a\u0000b'],
      ['escape character', 'a\u001bb'],
      ['DEL', 'a\u007fb'],
      ['line feed smuggling a header', 'a\nX-Injected: 1'],
      ['non-ASCII raw', 'café'],
      ['non-ASCII quoted', '"café"'],
      ['emoji', '"🔑"'],
      ['latin-1 byte', Buffer.from([0x61, 0xe9, 0x62])],
      ['SQL with spaces', "'; DROP TABLE idempotency_keys; --"],
      ['unterminated string', '"abc'],
      ['bad escape', '"a\\xb"'],
      ['two items', '"abc" "def"'],
      ['a quote closing early', '"a"b"'],
      ['space in a quoted key', '"ab c"'],
      ['space in a raw key', 'ab c'],
      ['an inner list', '("a" "b")'],
    ];

    it('refuses each named malformed key with 400 key_invalid (or Node’s own 400/431), runs nothing and stores nothing', async () => {
      const before = f.server.counters.executions;
      const summary: string[] = [];
      for (const [label, header, reasons] of named) {
        const res = await echo(header);
        expectRefused(res, label, reasons);
        summary.push(`${label}: ${res.status}${res.reason ? ` ${res.reason}` : ' (Node parser)'}`);
      }
      expect(f.server.counters.executions).toBe(before);
      expect(await storedKeys()).toBe(0);
      console.log(`[hostile] ${named.length} malformed keys refused:\n  ${summary.join('\n  ')}`);
    });

    it('refuses any key holding a character outside visible ASCII, without running or storing anything', async () => {
      const before = f.server.counters.executions;
      const visible = fc.string({
        unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
        maxLength: 20,
      });
      // Never a quote or backslash at the start of the bad part, so the value stays malformed as intended.
      const bad = fc.oneof(
        fc.integer({ min: 0x00, max: 0x20 }).map((c) => String.fromCharCode(c)),
        fc.constant('\u007f'),
        fc
          .integer({ min: 0x80, max: 0x10ffff })
          .filter((c) => c < 0xd800 || c > 0xdfff)
          .map((c) => String.fromCodePoint(c)),
      );
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom('1', 'a'),
          visible,
          bad,
          visible,
          fc.boolean(),
          async (lead, a, b, c, quoted) => {
            // A visible lead character keeps the bad one away from the edges, where trimming would hide it.
            const key = `${lead}${a.replaceAll('"', '').replaceAll('\\', '')}${b}${c.replaceAll('"', '').replaceAll('\\', '')}z`;
            runs++;
            const res = await echo(quoted ? `"${key}"` : key);
            expectRefused(res, JSON.stringify(key));
          },
        ),
        { numRuns: 150, seed: 6 },
      );
      expect(f.server.counters.executions).toBe(before);
      expect(await storedKeys()).toBe(0);
      console.log(
        `[hostile] property: ${runs} keys with a non-visible or non-ASCII character all refused, none stored`,
      );
    });

    it('refuses any key longer than 255 characters', async () => {
      const before = f.server.counters.executions;
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 256, max: 8000 }), fc.boolean(), async (length, quoted) => {
          const key = 'x'.repeat(length);
          expectRefused(await echo(quoted ? `"${key}"` : key), `length ${length}`);
        }),
        { numRuns: 30, seed: 7 },
      );
      expect(f.server.counters.executions).toBe(before);
      expect(await storedKeys()).toBe(0);
    });

    it('refuses each call of a batch whose Idempotency-Keys dictionary is malformed', async () => {
      const before = f.server.counters.executions;
      const malformed = [
        'b0=k1, b1=k2',
        'b0="k1", 3="k2"',
        'b0="", b1="k2"',
        'b0="k1" b1="k2"',
        'b0="k1", b1="k 2"',
        'b0="k1", b1="caf\u00e9"',
        `b0="k1", b1="${'k'.repeat(256)}"`,
        'b0="k1", b1=("a" "b")',
        'b0="k1", b1=',
        '=',
        ',',
        'b0="unterminated',
      ];
      for (const header of malformed) {
        const res = await callBatchRaw({
          port: f.server.port,
          path: 'payments.echo',
          inputs: [{ i: 0 }, { i: 1 }],
          keys: header,
        });
        expect([400, 207, 431], `${header}: ${res.status} ${res.body.slice(0, 200)}`).toContain(res.status);
        expect(res.status).toBeLessThan(500);
        // A dictionary that cannot be parsed leaves no call with a trustworthy key.
        for (const call of res.calls) expect(call.reason, `${header}: ${JSON.stringify(call)}`).toBe('key_invalid');
        expect(res.calls.length, header).toBe(2);
      }
      expect(f.server.counters.executions).toBe(before);
      expect(await storedKeys()).toBe(0);
      console.log(`[hostile] ${malformed.length} malformed Idempotency-Keys dictionaries refused for every call`);
    });
  });

  describe('valid keys made of hostile characters', () => {
    it('stores any 1–255 visible-ASCII key exactly as sent and replays it, SQL metacharacters and quotes included', async () => {
      const visible = fc.string({
        unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
        minLength: 1,
        maxLength: 255,
      });
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(visible, fc.boolean(), async (key, quoted) => {
          runs++;
          // Raw form is only possible when the key does not itself start with a quote.
          const asQuoted = quoted || key.startsWith('"');
          const header = asQuoted ? `"${key.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"` : key;
          // A user per run: fast-check may draw the same key twice, and that is another test's business.
          const user = `u${runs}`;
          const input = { probe: runs };
          const first = await echo(header, input, user);
          expect(first.status, `${JSON.stringify(key)} → ${first.body.slice(0, 200)}`).toBe(200);
          const again = await echo(header, input, user);
          expect(again.status).toBe(200);
          expect(again.data).toEqual(first.data);
          expect(again.headers['idempotent-replayed']).toBe('true');
          const rows = await keyRows(f.backend.db, { scope: `user:${user}`, key });
          expect(rows.map((r) => r.key)).toEqual([key]);
        }),
        {
          numRuns: 60,
          seed: 8,
          examples: [
            ["';DROP/**/TABLE/**/idempotency_keys;--", false],
            ['"quoted"', true],
            ["x'or'1'='1", false],
            ['$1$$;\\', true],
            ['%_*?', false],
          ],
        },
      );
      // The table survived every SQL-looking key.
      expect(await storedKeys()).toBe(runs);
      console.log(`[hostile] property: ${runs} visible-ASCII keys stored byte-exact and replayed; table intact`);
    });
  });
});
