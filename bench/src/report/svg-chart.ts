import type { Spread } from '../load/stats.ts';

export interface ChartSeries {
  label: string;
  color: string;
}

export interface ChartGroup {
  title: string;
  /** One bar per series, per contender; `undefined` leaves the slot empty. */
  rows: { contender: string; values: (Spread | undefined)[] }[];
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const finite = (n: number | undefined): n is number => n !== undefined && Number.isFinite(n);

/** An axis end and tick step that fit the medians (whiskers past the end are clipped, not rescaled). */
function axisFor(group: ChartGroup): { end: number; step: number } {
  const medians = group.rows.flatMap((r) => r.values.map((v) => v?.median)).filter(finite);
  const top = Math.max(1.2, ...medians.map((m) => m * 1.25));
  const step = [0.25, 0.5, 1, 2, 5].find((s) => top / s <= 8) ?? 10;
  return { end: Math.ceil(top / step) * step, step };
}

/**
 * Horizontal bar chart of throughput ratios to plain, one axis per group: a bar per median, a whisker from the
 * smallest to the largest per-round ratio, a dashed line at 1.0×. Plain SVG text, no chart dependency.
 */
export function ratioChart(title: string, series: ChartSeries[], groups: ChartGroup[]): string {
  const left = 160;
  const width = 680;
  const plotWidth = width - left - 70;
  const barHeight = 11;
  const rowGap = 7;
  const out: string[] = [];
  let y = 62;
  for (const group of groups) {
    const { end, step } = axisFor(group);
    const x = (v: number) => left + (Math.max(0, Math.min(v, end)) / end) * plotWidth;
    out.push(`<text x="10" y="${y}" font-weight="bold">${esc(group.title)}</text>`);
    y += 10;
    const top = y;
    for (const row of group.rows) {
      const rowHeight = series.length * barHeight;
      out.push(`<text x="${left - 6}" y="${y + rowHeight / 2 + 4}" text-anchor="end">${esc(row.contender)}</text>`);
      row.values.forEach((v, i) => {
        const by = y + i * barHeight;
        if (!v || !finite(v.median)) return;
        out.push(
          `<rect x="${left}" y="${by + 1}" width="${(x(v.median) - left).toFixed(1)}" height="${barHeight - 2}" fill="${series[i]!.color}"/>`,
        );
        if (finite(v.min) && finite(v.max)) {
          const cy = by + barHeight / 2;
          out.push(
            `<line x1="${x(v.min).toFixed(1)}" y1="${cy}" x2="${x(v.max).toFixed(1)}" y2="${cy}" stroke="#333" stroke-width="1"/>`,
          );
        }
        const labelAt = Math.max(x(v.median), finite(v.max) ? x(v.max) : 0) + 4;
        out.push(
          `<text x="${labelAt.toFixed(1)}" y="${by + barHeight - 2}" font-size="9">${v.median.toFixed(2)}×</text>`,
        );
      });
      y += rowHeight + rowGap;
    }
    out.push(
      `<line x1="${x(1)}" y1="${top - 4}" x2="${x(1)}" y2="${y - rowGap + 2}" stroke="#c00" stroke-dasharray="3,2"/>`,
    );
    out.push(
      `<line x1="${left}" y1="${y - rowGap + 4}" x2="${left + plotWidth}" y2="${y - rowGap + 4}" stroke="#999"/>`,
    );
    for (let v = 0; v <= end + 1e-9; v += step) {
      out.push(
        `<text x="${x(v).toFixed(1)}" y="${y + 8}" text-anchor="middle" font-size="9" fill="#555">${Number(v.toFixed(2))}×</text>`,
      );
    }
    y += 34;
  }
  const legend = series
    .map(
      (s, i) =>
        `<rect x="${left + i * 200}" y="${y - 10}" width="10" height="10" fill="${s.color}"/><text x="${left + i * 200 + 14}" y="${y - 1}">${esc(s.label)}</text>`,
    )
    .join('');
  y += 14;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="22" font-size="14" font-weight="bold">${esc(title)}</text>`,
    `<text x="10" y="40" font-size="10" fill="#555">bar: median of per-round ratios; whisker: min–max over rounds (clipped at the axis end); dashed: plain = 1.0×</text>`,
    ...out,
    legend,
    '</svg>',
    '',
  ].join('\n');
}
