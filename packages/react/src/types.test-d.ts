import { QueryClient } from '@tanstack/react-query';
import { createTRPCClient, httpLink, type TRPCClientErrorLike } from '@trpc/client';
import { createTRPCOptionsProxy } from '@trpc/tanstack-react-query';
import { describe, expectTypeOf, test } from 'vitest';
import type { AppRouter } from './__tests__/router.js';
import { type EarlierOutcome, useIdempotentMutation } from './index.js';

const trpc = createTRPCOptionsProxy<AppRouter>({
  client: createTRPCClient<AppRouter>({ links: [httpLink({ url: '' })] }),
  queryClient: new QueryClient(),
});
type Input = { amountCents: number; description: string };
type Output = { id: number; amountCents: number; createdAt: string }; // no transformer: a Date arrives as a string

describe('useIdempotentMutation keeps tRPC types', () => {
  test("mutate takes the procedure's input and data is its output", () => {
    const pay = useIdempotentMutation(trpc.payments.create.mutationOptions());
    expectTypeOf(pay.mutate).parameter(0).toEqualTypeOf<Input>();
    expectTypeOf(pay.mutateAsync).returns.resolves.toEqualTypeOf<Output>();
    expectTypeOf(pay.data).toEqualTypeOf<Output | undefined>();
    expectTypeOf(pay.error).toEqualTypeOf<TRPCClientErrorLike<{
      input: Input;
      output: Output;
      transformer: false;
      errorShape: AppRouter['_def']['_config']['$types']['errorShape'];
    }> | null>();
    expectTypeOf(pay.idempotency.key).toEqualTypeOf<string | undefined>();
    expectTypeOf(pay.idempotency.earlier).toEqualTypeOf<EarlierOutcome<Output, Input> | undefined>();
  });

  test('a wrong input does not compile', () => {
    const pay = useIdempotentMutation(trpc.payments.create.mutationOptions());
    pay.mutate({ amountCents: 4000, description: 'ok' });
    // @ts-expect-error amountCents is a number
    pay.mutate({ amountCents: '4000', description: 'x' });
    // @ts-expect-error description is required
    pay.mutate({ amountCents: 4000 });
  });

  test("the mutation's own callbacks and the settings are typed from the procedure", () => {
    useIdempotentMutation(
      trpc.payments.create.mutationOptions({
        onSuccess: (data, variables) => {
          expectTypeOf(data).toEqualTypeOf<Output>();
          expectTypeOf(variables).toEqualTypeOf<Input>();
        },
      }),
      {
        onEarlierSettled: (outcome) => {
          if (outcome.status === 'succeeded') expectTypeOf(outcome.data).toEqualTypeOf<Output>();
          expectTypeOf(outcome.variables).toEqualTypeOf<Input>();
        },
        confirmNewInput: async (earlier, variables) => {
          expectTypeOf(earlier).toEqualTypeOf<EarlierOutcome<Output, Input>>();
          expectTypeOf(variables).toEqualTypeOf<Input>();
          return earlier.status === 'failed';
        },
      },
    );
  });
});
