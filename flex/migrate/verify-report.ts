import { describeSum, type VolumeSum } from './verify-sum.js';

/** One call or action of `twinvol migrate verify`, in the order made. */
export interface VerifyStep {
  /** flex: the FlexVolume driver as kubelet runs it; csi: an RPC; host: what kubelet or verify does itself. */
  model: 'flex' | 'csi' | 'host';
  call: string;
  outcome: string;
  ms?: number;
  detail?: string;
}

export type Phase = 'flex' | 'csi' | 'rollback';

export interface VerifyResult {
  volume: string;
  /** twinvol (block, dir, static) or exec (a third-party driver). */
  kind: string;
  driver: string;
  csi: string;
  steps: VerifyStep[];
  sums: Partial<Record<Phase, VolumeSum>>;
  /** What differs: FlexVolume -> CSI, and CSI -> FlexVolume again (rollback). */
  differences: { csi: string[]; rollback: string[] };
  verdict: 'match' | 'mismatch' | 'failed';
  error?: string;
}

/** Collects the steps, printing each as it happens unless the report is JSON. */
export class Recorder {
  readonly steps: VerifyStep[] = [];
  /** Set by SIGINT or SIGTERM: the next step stops the run and the teardown follows. */
  interrupted = '';

  constructor(private readonly live: boolean) {}

  step(s: VerifyStep): void {
    this.steps.push(s);
    if (this.live) process.stdout.write(stepLine(s));
    if (this.interrupted) throw new Error(`interrupted by ${this.interrupted}`);
  }

  heading(text: string): void {
    if (this.live) process.stdout.write(`\n${text}\n`);
  }

  note(text: string): void {
    if (this.live) process.stdout.write(`  ${text}\n`);
  }
}

/**
 * Runs `what`, its failure's message added to `errors` rather than thrown: a teardown tries every step
 * even when one fails (flex/migrate/verify-flex.ts, verify-csi.ts down, verify.ts sweep).
 */
export async function attempt(errors: string[], what: () => Promise<unknown>): Promise<void> {
  try {
    await what();
  } catch (err) {
    errors.push(err instanceof Error ? err.message : String(err));
  }
}

function stepLine(s: VerifyStep): string {
  const ms = s.ms === undefined ? '' : `${s.ms.toFixed(0).padStart(5)} ms`;
  return `  [${s.model.padEnd(4)}] ${s.call.padEnd(30)} ${s.outcome.padEnd(13)}${ms}${s.detail ? `  ${s.detail}` : ''}\n`;
}

/** The end of the human report: the checksums side by side and the verdict. */
export function summary(r: VerifyResult): string {
  const lines = ['', 'checksums'];
  const names: Record<Phase, string> = { flex: 'FlexVolume', csi: 'CSI', rollback: 'FlexVolume again' };
  for (const phase of ['flex', 'csi', 'rollback'] as const) {
    const s = r.sums[phase];
    lines.push(`  ${names[phase].padEnd(17)} ${s ? describeSum(s) : '(not taken)'}`);
  }
  for (const [what, diffs] of [['FlexVolume -> CSI', r.differences.csi], ['CSI -> FlexVolume (rollback)', r.differences.rollback]] as const)
    for (const d of diffs) lines.push(`  differs, ${what}: ${d}`);
  if (r.verdict === 'match') lines.push('', `verdict: MATCH: volume ${r.volume} reads the same through FlexVolume, through CSI, and through FlexVolume again`);
  else if (r.verdict === 'mismatch') lines.push('', `verdict: MISMATCH: volume ${r.volume} does not read the same through both models`);
  else lines.push('', `verdict: FAILED: ${r.error ?? 'see the steps above'}`);
  return `${lines.join('\n')}\n`;
}

/** The JSON report: the sums without their per-entry lists (the differences name what matters). */
export function jsonReport(r: VerifyResult): string {
  const sums = Object.fromEntries(Object.entries(r.sums).map(([k, s]) => [k, { tree: { digest: s.tree.digest, entries: s.tree.entries, bytes: s.tree.bytes }, ...(s.device ? { device: s.device } : {}) }]));
  return `${JSON.stringify({ ...r, sums })}\n`;
}
