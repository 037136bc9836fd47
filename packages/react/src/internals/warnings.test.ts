import { afterEach, expect, test, vi } from 'vitest';
import { warnRetrySet } from './warnings.js';

afterEach(() => vi.restoreAllMocks());

test('warns when the mutation or the QueryClient default sets retry, and only then', () => {
  const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
  warnRetrySet(undefined, undefined);
  warnRetrySet(0, false);
  expect(warn).not.toHaveBeenCalled();
  warnRetrySet(3, undefined);
  warnRetrySet(undefined, true);
  expect(warn).toHaveBeenCalledTimes(2);
  expect(warn.mock.calls[0]![0]).toMatch(/retry.*\(3\) is ignored and set to 0.*idempotencyLink is the one layer/);
});
