import { type DriverRun, type OutputMode, readReply, type ReplyOutcome, shownOutput } from '../shared/index.js';

/**
 * How `twinvol flex check` (flex/check.ts) judges each driver call, and what it says about the driver.
 * Every reply is read twice, through the exec backend's own reader (shared/backends/exec-reply.ts): with
 * kubelet's strict rules, and with the lenient ones `--flex-lenient` turns on in the CSI server, so the
 * verdict says exactly what the server would make of the driver.
 */

export type QuirkKind =
  | 'stderr-noise'
  | 'exit-code-mismatch'
  | 'non-json'
  | 'no-reply'
  | 'stacked-mount'
  | 'missing-not-supported'
  | 'not-idempotent'
  | 'leftover-mounts'
  | 'leftover-processes'
  | 'init-not-success'
  | 'nothing-mounted'
  | 'killed-by-signal';

/** What a quirk means for each host: kubelet as it is, and twinvol's CSI server (as it is, or --flex-lenient). */
export interface Quirk {
  kind: QuirkKind;
  detail: string;
  kubelet: boolean;
  twinvol: 'ok' | 'lenient' | 'no';
}

export interface StepLine {
  /** "mount #2", "init", "teardown". */
  step: string;
  result: 'pass' | 'quirk' | 'fail' | 'skipped';
  detail: string;
  quirks: Quirk[];
}

export interface Verdict {
  kind: 'kubelet' | 'twinvol' | 'none';
  /** The CSI server's flags this driver needs (kind twinvol). */
  settings: string[];
  summary: string;
}

/** A call judged: the line, and the outcome the lifecycle goes on with (the lenient one where that rescued it). */
export interface Judged {
  line: StepLine;
  outcome: ReplyOutcome | undefined;
}

const LENIENT_KINDS: readonly [RegExp, QuirkKind, string][] = [
  [/^output around the reply/, 'stderr-noise', 'text around the JSON reply (kubelet reads stdout and stderr as one JSON document)'],
  [/^exit code \d+ with Success/, 'exit-code-mismatch', 'Success with a non-zero exit code (kubelet: "driver bug")'],
  [/^empty output/, 'missing-not-supported', 'prints nothing where kubelet needs {"status":"Not supported"}'],
];

/**
 * One driver call judged under both readings, the `secrets` its options carried (shared/log.ts
 * secretsInOptions) cut out of what the report shows, as the CSI server cuts them
 * (shared/backends/exec-driver.ts): a driver that echoes its options or a refused password would put
 * them in a report that is made to be passed around.
 */
export function judgeCall(step: string, verb: string, run: DriverRun, timeoutMs: number, secrets: readonly string[] = []): Judged {
  const judged = judgeReadings(step, verb, run, timeoutMs, (text) => shownOutput(text, secrets));
  if (secrets.length === 0) return judged;
  // Also the words this file adds around the driver's (a Success's message is shown as it is).
  const { line } = judged;
  return { ...judged, line: { ...line, detail: shownOutput(line.detail, secrets), quirks: line.quirks.map((q) => ({ ...q, detail: shownOutput(q.detail, secrets) })) } };
}

function judgeReadings(step: string, verb: string, run: DriverRun, timeoutMs: number, show: (text: string) => string): Judged {
  if (run.startError) return failed(step, `could not be run: ${run.startError}`, []);
  if (run.timedOut)
    return failed(step, `no reply within ${timeoutMs} ms: its process group was killed`, [
      { kind: 'no-reply', detail: `${verb} hung past the deadline`, kubelet: false, twinvol: 'no' },
    ]);
  const done = { exitCode: run.exitCode, output: run.output };
  // Both readers see only exit code -1 for a signal death: the signal is named here.
  const died = run.signal === undefined ? undefined : `killed by ${run.signal === 'unknown' ? 'a signal' : run.signal}`;
  const strict = readReply(verb, done, 'strict', show);
  if (strict.outcome.kind !== 'failure') return { line: { step, result: 'pass', detail: describe(strict.outcome), quirks: [] }, outcome: strict.outcome };
  const strictMessage = died ? `${died}; ${strict.outcome.message}` : strict.outcome.message;
  const lenient = readReply(verb, done, 'lenient' satisfies OutputMode, show);
  if (lenient.outcome.kind === 'failure') {
    const nonJson = lenient.outcome.message.includes('no JSON status object');
    return failed(step, strictMessage, nonJson ? [{ kind: 'non-json', detail: 'no JSON status object in the output', kubelet: false, twinvol: 'no' }] : []);
  }
  const quirks: Quirk[] = lenient.quirks.map((q) => {
    if (died && /^exit code -1 with Success/.test(q))
      return { kind: 'killed-by-signal', detail: `${died} after printing Success (kubelet: the exec error fails the call)`, kubelet: false, twinvol: 'lenient' };
    const known = LENIENT_KINDS.find(([re]) => re.test(q));
    return { kind: known?.[1] ?? 'stderr-noise', detail: known ? `${known[2]}: ${oneLine(q, 120)}` : oneLine(q, 120), kubelet: false, twinvol: 'lenient' };
  });
  return { line: { step, result: 'quirk', detail: `kubelet: ${oneLine(strictMessage, 120)}; lenient: ${describe(lenient.outcome)}`, quirks }, outcome: lenient.outcome };
}

function failed(step: string, detail: string, quirks: Quirk[]): Judged {
  return { line: { step, result: 'fail', detail: oneLine(detail), quirks }, outcome: undefined };
}

function describe(o: ReplyOutcome): string {
  if (o.kind === 'not-supported') return 'Not supported';
  if (o.kind === 'failure') return oneLine(o.message);
  const s = o.status;
  const extra = [s.device && `device ${s.device}`, s.message && `message: ${s.message}`].filter(Boolean);
  return ['Success', ...extra].join(', ');
}

/** Adds a quirk found after the call (the mount table, the process table) to its line. */
export function addQuirk(line: StepLine, quirk: Quirk): void {
  line.quirks.push(quirk);
  if (line.result === 'pass') line.result = 'quirk';
  if (!quirk.kubelet && quirk.twinvol === 'no') line.result = 'fail';
}

export function verdictOf(lines: readonly StepLine[], name: string): Verdict {
  const quirks = lines.flatMap((l) => l.quirks);
  const fails = lines.filter((l) => l.result === 'fail');
  const failsForTwinvol = fails.filter((l) => l.quirks.length === 0 || l.quirks.some((q) => q.twinvol === 'no'));
  if (failsForTwinvol.length) return { kind: 'none', settings: [], summary: `does not run: ${failsForTwinvol.map((l) => l.step).join(', ')} failed` };
  // A lifecycle that stopped early proved nothing about the steps it never tried.
  if (!lines.some((l) => l.step === 'teardown')) return { kind: 'none', settings: [], summary: `does not run: the lifecycle stopped after ${lines.at(-1)?.step ?? 'nothing'}` };
  const forKubelet = quirks.filter((q) => !q.kubelet);
  if (!fails.length && !forKubelet.length) return { kind: 'kubelet', settings: [], summary: 'runs under kubelet as it is' };
  const settings = quirks.some((q) => q.twinvol === 'lenient') ? ['--flex-lenient', name] : [];
  const kinds = [...new Set(forKubelet.map((q) => q.kind))].join(', ');
  return {
    kind: 'twinvol',
    settings,
    summary: `does not run under kubelet as it is (${kinds}); runs behind twinvol's CSI server ${settings.length ? `with ${settings.join(' ')}` : 'as it is'}`,
  };
}

/** The human report: one line per step, then the verdict. */
export function formatReport(lines: readonly StepLine[], verdict: Verdict): string {
  const width = Math.max(...lines.map((l) => l.step.length));
  const out = lines.map((l) => {
    const quirks = l.quirks.map((q) => `\n${' '.repeat(width + 10)}${q.kind}: ${q.detail}`).join('');
    return `${l.step.padEnd(width)}  ${l.result.padEnd(7)} ${l.detail}${quirks}`;
  });
  out.push(`verdict: ${verdict.summary}`);
  return `${out.join('\n')}\n`;
}

const oneLine = (text: string, max = 300) => {
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length > max ? `${t.slice(0, max)}...` : t;
};
