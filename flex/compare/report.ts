import type { Difference, VolumeState } from './state.js';
import { type CallSample, type CompareBackend, type Model, NOT_IN_PROTOCOL, type RoundResult, type StepName, STEPS } from './workload.js';

/** One step of one model over all rounds. */
export interface ModelStep {
  supported: boolean;
  /** Why a step is unsupported. */
  note?: string;
  /** The protocol calls the step was made of. */
  calls: string[];
  /** Wall-clock ms of the step (its calls together) in each round, with their median and p95; null when unsupported. */
  latencyMs: { median: number; p95: number; rounds: number[] } | null;
  /** Processes started in each round: FlexVolume the executable per call + its tools; CSI the server's tools. */
  processes: number[];
  /** How often each tool ran, over all rounds. */
  tools: Record<string, number>;
  /** How often each mount or loop device was made or undone as a system call (mount, umount2, ioctl), over all rounds: no process ran for these. */
  systemCalls: Record<string, number>;
  /** Rounds in which a call of the step failed (only expansion may), and the distinct messages. */
  failedRounds: number;
  errors: string[];
}

export interface StepReport {
  step: StepName;
  flex: ModelStep;
  csi: ModelStep;
}

export interface BackendReport {
  backend: CompareBackend;
  volume: { sizeBytes: number; growBytesPerRound: number; fsType: string };
  steps: StepReport[];
  /** Where the two models left the published volume differently (empty: the same), first round each was seen. */
  differences: (Difference & { round: number })[];
  /** What each model left published in the first round, as compared (state.ts). */
  state: { flex: VolumeState; csi: VolumeState } | null;
  /** Whether the tool shim's count of each FlexVolume call equals the executable's own log line. */
  flexLogAgrees: boolean;
}

export interface CompareReport {
  command: 'twinvol compare';
  startedAt: string;
  node: string;
  rounds: number;
  /** What each figure measures. */
  method: Record<'latency' | 'processes' | 'tools' | 'state' | 'order', string>;
  /** From spawning the private twinvol-csi to its first Probe answered ready. */
  csiStartMs: number;
  backends: BackendReport[];
}

export const METHOD: CompareReport['method'] = {
  latency: 'wall-clock ms per step and round. FlexVolume: from spawning the executable to its exit, once per call, start-up included, as kubelet waits for it. CSI: from sending the request to the reply, over the unix socket to the already running server.',
  processes: 'processes started per step and round. FlexVolume: 1 per call (the executable) + the tools it ran. CSI: the tools the server ran (the server itself is long-lived).',
  tools: "counted by the same PATH shim in front of both models (one extra sh per tool run, in both); the FlexVolume executable's own log line must agree (flexLogAgrees). Tools run by those tools (mount helpers) are not counted. Mounts, unmounts and loop devices bound or let go as system calls through the mount addon run no process, so the shim cannot see them: they are listed as mount(2), umount2(2) and ioctl(2), from the FlexVolume executable's log line (systemCalls) and from the CSI server's debug log (its system call lines, by request id; the server runs at --log-level debug here, which costs it a few log lines per call).",
  state: 'after publish and expand: /proc/self/mountinfo and stat of the staging and pod paths of each model, loop devices named by their backing file, volume names made neutral.',
  order: 'each model has its own volume per backend, reused every round; odd rounds run FlexVolume first, even rounds CSI first.',
};

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length === 0 ? 0 : s.length % 2 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
}

/** Nearest rank: the smallest sample at or above 95 % of them. */
export function p95(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : (s[Math.ceil(0.95 * s.length) - 1] ?? 0);
}

const round1 = (x: number) => Math.round(x * 10) / 10;

/** One model's rounds folded into its step reports. */
export function modelSteps(model: Model, rounds: readonly RoundResult[]): Record<StepName, ModelStep> {
  const out = {} as Record<StepName, ModelStep>;
  for (const step of STEPS) {
    const perRound = rounds.map((r) => r.steps[step] ?? []);
    const note = NOT_IN_PROTOCOL[step]?.[model];
    const ran = perRound.some((calls) => calls.length);
    const calls = [...new Set(perRound.flat().map((c) => c.call))];
    const tally = (names: (c: CallSample) => readonly string[]) => {
      const out: Record<string, number> = {};
      for (const c of perRound.flat()) for (const n of names(c)) out[n] = (out[n] ?? 0) + 1;
      return out;
    };
    const ms = perRound.map((calls) => round1(calls.reduce((sum, c) => sum + c.ms, 0)));
    out[step] = {
      supported: ran,
      ...(ran ? {} : { note: note ?? 'not run for this backend: it cannot do it' }),
      calls,
      latencyMs: ran ? { median: round1(median(ms)), p95: round1(p95(ms)), rounds: ms } : null,
      processes: ran ? perRound.map((calls) => calls.reduce((n, c) => n + c.tools.length + (model === 'flex' ? 1 : 0), 0)) : [],
      tools: tally((c) => c.tools),
      systemCalls: tally((c) => c.systemCalls),
      failedRounds: perRound.filter((calls) => calls.some((c) => c.error !== undefined)).length,
      errors: [...new Set(perRound.flat().flatMap((c) => (c.error === undefined ? [] : [c.error])))],
    };
  }
  return out;
}

const pad = (s: string, n: number) => (s.length >= n ? s : s + ' '.repeat(n - s.length));
const lpad = (s: string, n: number) => (s.length >= n ? s : ' '.repeat(n - s.length) + s);

/** The tools, then the system calls as `name(2)`, each with how often it ran per round when not once. */
function toolText(m: ModelStep, rounds: number): string {
  const names = workNames(m).map(([t, n]) => (n === rounds ? t : `${t} x${round1(n / rounds)}`));
  return names.length ? names.join(' ') : '-';
}

/** A step's tools and system calls (`mount(2)`, a refused one `mount(2):EINVAL`), with how often each ran over all rounds. */
export function workNames(m: ModelStep): [string, number][] {
  const calls = Object.entries(m.systemCalls).map(([c, n]): [string, number] => [c.replace(/^([a-z0-9]+)/, '$1(2)'), n]);
  return [...Object.entries(m.tools), ...calls];
}

/** The report as a terminal table, one block per backend, then the differences. */
export function formatCompareTable(report: CompareReport): string {
  const lines = [
    `twinvol compare: ${report.rounds} round${report.rounds === 1 ? '' : 's'} per backend on node ${report.node}; twinvol-csi ready in ${round1(report.csiStartMs)} ms`,
    'latency: ms per step (median, p95); procs: processes started per step (median); tools: what ran, per round; name(2): a mount or loop device made or undone as a system call, no process',
  ];
  for (const b of report.backends) {
    const size = `${b.volume.sizeBytes / 2 ** 20}Mi`;
    lines.push('', `${b.backend} (${b.volume.fsType || 'no fsType'}, ${size}${b.volume.growBytesPerRound ? `, grown ${b.volume.growBytesPerRound / 2 ** 20}Mi a round` : ''})`);
    lines.push(`${pad('STEP', 10)} ${pad('MODEL', 5)} ${pad('CALLS', 42)} ${lpad('MEDIAN', 8)} ${lpad('P95', 8)} ${lpad('PROCS', 5)}  TOOLS`);
    for (const s of b.steps) {
      for (const model of ['flex', 'csi'] as const) {
        const m = s[model];
        const first = model === 'flex' ? s.step : '';
        if (!m.supported || !m.latencyMs) {
          lines.push(`${pad(first, 10)} ${pad(model, 5)} ${m.note ?? 'not supported'}`);
          continue;
        }
        lines.push(
          `${pad(first, 10)} ${pad(model, 5)} ${pad(m.calls.join(', '), 42)} ${lpad(m.latencyMs.median.toFixed(1), 8)} ${lpad(m.latencyMs.p95.toFixed(1), 8)} ${lpad(String(median(m.processes)), 5)}  ${toolText(m, report.rounds)}`,
        );
        if (m.failedRounds) lines.push(`${pad('', 16)} failed in ${m.failedRounds} of ${report.rounds} rounds: ${m.errors.join(' | ')}`);
      }
    }
    if (!b.flexLogAgrees) lines.push("warning: the tool shim's count differs from the FlexVolume executable's log: tool counts are not exact");
    if (!b.differences.length) lines.push('differences in the resulting state: none');
    else {
      lines.push('differences in the resulting state:');
      for (const d of b.differences) lines.push(`  ${d.where} ${d.field}: flex ${JSON.stringify(d.flex)}, csi ${JSON.stringify(d.csi)} (round ${d.round})`);
    }
  }
  return `${lines.join('\n')}\n`;
}
