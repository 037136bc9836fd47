import type { BenchResults } from '../results.ts';

export interface TargetCheck {
  target: string;
  measured: string;
  met: boolean | undefined;
}

const f2 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : n.toFixed(2));
/** Unknown (–) rather than failed when a side was not measured (NaN: no request completed). */
const known = (...xs: (number | undefined)[]) => xs.every((x) => x !== undefined && Number.isFinite(x));

/** The targets, checked against this run (goals to measure against, not test assertions). */
export function checkTargets(r: BenchResults): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const overhead = (name: string, handler: string) =>
    r.overhead?.find((o) => o.contender === name && o.handler === handler)?.ratio.median;
  // The `-before` contenders (BENCH_BEFORE_DIST) are an earlier build: the goals compare them, these targets do not.
  const ours = (r.contenders ?? []).filter((c) => c.kind === 'ours' && !c.replayOnly && !c.name.endsWith('-before'));
  const txNames = ours.filter((c) => c.mode === 'transaction').map((c) => c.name);
  const leaseNames = ours.filter((c) => c.mode === 'lease').map((c) => c.name);
  for (const name of txNames) {
    const payment = overhead(name, 'payment');
    const light = overhead(name, 'light');
    checks.push({
      target: `${name} ÷ plain ≥ 0.85 (payment)`,
      measured: f2(payment),
      met: known(payment) ? payment! >= 0.85 : undefined,
    });
    checks.push({
      target: `${name} ÷ plain ≥ 0.70 (light)`,
      measured: f2(light),
      met: known(light) ? light! >= 0.7 : undefined,
    });
  }
  for (const name of leaseNames) {
    for (const handler of ['light', 'payment']) {
      const lease = overhead(name, handler);
      const classic = overhead('classic', handler);
      checks.push({
        target: `${name} ≥ classic (${handler})`,
        measured: `${f2(lease)} vs ${f2(classic)}`,
        met: known(lease, classic) ? lease! >= classic! : undefined,
      });
    }
  }
  for (const row of (r.replay ?? []).filter((x) => txNames.includes(x.contender) || leaseNames.includes(x.contender))) {
    const fastestPeer = Math.max(
      ...(r.replay ?? [])
        .filter((x) => ['powertools', 'node-idempotency'].includes(x.contender))
        .map((x) => x.ratioLight.median),
    );
    checks.push({
      target: `${row.contender} replay ≥ 2.5× plain light and ≥ fastest peer (${f2(fastestPeer)})`,
      measured: f2(row.ratioLight.median),
      met: known(row.ratioLight.median, fastestPeer)
        ? row.ratioLight.median >= 2.5 && row.ratioLight.median >= fastestPeer * 0.95
        : undefined,
    });
  }
  if (r.scaling && r.scaling.length > 1) {
    const last = r.scaling[r.scaling.length - 1]!;
    checks.push({
      target: `claim p50 at ${last.rows.toExponential(0)} rows ≤ 1.2× of ${r.scaling[0]!.rows.toExponential(0)}`,
      measured: `${f2(last.claimP50VsSmallest)}×`,
      met: known(last.claimP50VsSmallest) ? last.claimP50VsSmallest <= 1.2 : undefined,
    });
  }
  for (const s of (r.storm ?? []).filter((x) => txNames.includes(x.contender) || leaseNames.includes(x.contender))) {
    checks.push({
      target: `${s.contender}: exactly 1 execution in the storm`,
      measured: String(s.executions),
      met: s.executions === 1,
    });
  }
  return checks;
}
