'use client';

import { type FaultMode, faultModes } from '@/network/faultModes';

export function NetworkControl({ mode, onChange }: { mode: FaultMode; onChange: (mode: FaultMode) => void }) {
  const current = faultModes.find((entry) => entry.mode === mode);
  return (
    <section className="card">
      <h2>Flaky network</h2>
      <div className="modes" role="radiogroup" aria-label="Flaky network mode">
        {faultModes.map((entry) => (
          <label key={entry.mode} className={entry.mode === mode ? 'mode active' : 'mode'}>
            <input
              type="radio"
              name="fault-mode"
              value={entry.mode}
              checked={entry.mode === mode}
              onChange={() => onChange(entry.mode)}
              data-testid={`fault-${entry.mode}`}
            />
            {entry.label}
          </label>
        ))}
      </div>
      <p className="hint">{current?.explain}</p>
    </section>
  );
}
