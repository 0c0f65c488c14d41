/** The demo's console output: one line per protocol call, so the two models read side by side. */
export interface StepLine {
  model: 'flex' | 'csi' | 'host';
  call: string;
  outcome: string;
  ms?: number;
  detail?: string;
}

export function printStep(s: StepLine): void {
  const ms = s.ms === undefined ? '' : `${s.ms.toFixed(0).padStart(5)} ms`;
  const detail = s.detail ? `  ${s.detail}` : '';
  process.stdout.write(`  [${s.model.padEnd(4)}] ${s.call.padEnd(34)} ${s.outcome.padEnd(10)}${ms}${detail}\n`);
}

export function heading(text: string): void {
  process.stdout.write(`\n${text}\n`);
}
