import { accessSync, constants, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { loadConfig, openCore } from '../../shared/index.js';
import { onInterrupt } from '../interrupt.js';
import { csiServerNear, releaseWorld, worldIn } from '../scratch-world.js';
import { PrivateCsi } from './csi-server.js';
import { runFlex } from './kubelet-flex.js';
import { renderHtml } from './html.js';
import { progressBar } from '../progress.js';
import { type BackendReport, type CompareReport, formatCompareTable, METHOD, modelSteps } from './report.js';
import { type Difference, diffStates } from './state.js';
import { ToolCounter } from './tool-count.js';
import { BACKENDS, type CompareBackend, csiRound, flexRound, type RoundResult, STEPS, volumeSpec, type Workbench } from './workload.js';

export { formatCompareTable, renderHtml };
export type { CompareReport };

export interface CompareOptions {
  backends: CompareBackend[];
  rounds: number;
  /** The command line's --json (runCompareCommand); runCompare itself only returns the report. */
  json?: boolean;
  html?: string;
  /** The FlexVolume executable to run as kubelet (default: the one running). */
  flexBin: string;
  /** The twinvol-csi executable (default: beside the FlexVolume executable). */
  csiBin: string;
  /** Called after each model's round. */
  onRound?: (label: string) => void;
  signal?: AbortSignal;
}

export interface CompareArgs {
  backend?: string;
  rounds?: number;
  json?: boolean;
  html?: string;
  csiServer?: string;
  flexBin: string;
}

export const MAX_ROUNDS = 1000;
const NODE = 'compare-node';

/** --backend's value for every backend of the workload. */
const ALL = 'all';

/**
 * The command line's values checked before anything is made: the options, or one line saying what is
 * wrong (exit 2). twinvol-csi is looked for beside the FlexVolume executable, and where `npm run build`
 * puts it (dist/csi/twinvol-csi from dist/flex/twinvol).
 */

export function compareUsage(a: CompareArgs): CompareOptions | string {
  const wanted = a.backend ?? ALL;
  const one = BACKENDS.find((b) => b === wanted);
  if (wanted !== ALL && one === undefined) return `--backend must be one of dir, block, static, all (got ${JSON.stringify(wanted)})`;
  const rounds = a.rounds ?? 5;
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > MAX_ROUNDS) return `--rounds must be a whole number from 1 to ${MAX_ROUNDS} (got ${String(a.rounds)})`;
  if (a.html !== undefined) {
    // Refused here, not when the page is written: by then the whole comparison has run for nothing.
    if (!a.html) return '--html must name a file (got "")';
    if (a.html.endsWith('/') || isDir(a.html)) return `--html ${JSON.stringify(a.html)} is a directory: name a file to write the page to`;
    const dir = dirname(resolve(a.html));
    if (!isDir(dir)) return `--html ${JSON.stringify(a.html)}: directory ${dir} does not exist`;
  }
  const csiBin = a.csiServer ?? csiServerNear(a.flexBin);
  if (!csiBin) return `twinvol-csi not found beside ${a.flexBin} (nor in ../csi/): name it with --csi-server`;
  // X_OK alone passes a directory (searchable is "executable" to access(2)); spawning it then fails with EACCES.
  if (!isFile(csiBin) || !executable(csiBin)) return `--csi-server ${JSON.stringify(csiBin)} is not an executable file`;
  return {
    backends: one === undefined ? [...BACKENDS] : [one],
    rounds,
    json: Boolean(a.json),
    ...(a.html !== undefined ? { html: resolve(a.html) } : {}),
    flexBin: a.flexBin,
    csiBin,
  };
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function isFile(p: string): boolean {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

function executable(p: string): boolean {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Runs the same workload through both models on this machine, in a private scratch world (its own data
 * root, state dir and kubelet dir under $TMPDIR, its own empty config file, a private twinvol-csi on a
 * socket there), and removes all of it afterwards, whatever happened: the server is stopped, every mount
 * below the scratch dir unmounted, its loop devices detached, the dir removed.
 */
export async function runCompare(o: CompareOptions): Promise<CompareReport> {
  const startedAt = new Date().toISOString();
  const scratch = worldIn(mkdtempSync(join(tmpdir(), 'twinvol-compare-')), NODE);
  let csi: PrivateCsi | undefined;
  try {
    const tools = new ToolCounter(join(scratch.root, 'shim'));
    // kubelet runs the driver with its own environment: here, the scratch world's settings and the shim.
    const path = [tools.path, dirname(process.execPath), '/usr/bin', '/bin'].filter((p, i, all) => p && all.indexOf(p) === i).join(':');
    const flexEnv = { ...scratch.env, PATH: path };
    const started = performance.now();
    csi = await PrivateCsi.start({
      bin: o.csiBin,
      socketPath: join(scratch.root, 'csi/csi.sock'),
      nodeId: NODE,
      args: ['--data-root', scratch.dataRoot, '--state-dir', scratch.stateDir, '--kubelet-dir', scratch.kubeletDir],
      env: { PATH: path, TWINVOL_CONFIG: scratch.env.TWINVOL_CONFIG ?? '' },
      keepLog: true,
    });
    const csiStartMs = performance.now() - started;
    tools.take();
    const w: Workbench = { scratch, core: openCore(loadConfig(scratch.env)), node: NODE, flexBin: o.flexBin, flexEnv, csi, tools, ...(o.signal ? { signal: o.signal } : {}) };
    const backends: BackendReport[] = [];
    for (const backend of o.backends) backends.push(await compareBackend(w, backend, o));
    return { command: 'twinvol compare', startedAt, node: NODE, rounds: o.rounds, method: METHOD, csiStartMs: Math.round(csiStartMs * 10) / 10, backends };
  } finally {
    try {
      await csi?.stop();
    } finally {
      // Through the runner, whose PATH has the sbin directories: with a bare PATH, as kubelet-style
      // callers give, a losetup looked up by name was not found and a loop device stayed bound.
      await releaseWorld(scratch.root);
    }
  }
}

async function compareBackend(w: Workbench, backend: CompareBackend, o: CompareOptions): Promise<BackendReport> {
  const specs = { flex: volumeSpec(backend, 'flex'), csi: volumeSpec(backend, 'csi') };
  for (const v of Object.values(specs)) await admin(w, ['volume', 'create', v.id, ...v.createArgs]);
  // What the administrator's create ran (it may format a block volume) is no step's.
  w.tools.take();
  const results: Record<'flex' | 'csi', RoundResult[]> = { flex: [], csi: [] };
  const differences: BackendReport['differences'] = [];
  for (let round = 1; round <= o.rounds; round++) {
    // Odd rounds FlexVolume first, even rounds CSI first: neither always runs on a warmer cache.
    const order = round % 2 ? (['flex', 'csi'] as const) : (['csi', 'flex'] as const);
    for (const model of order) {
      results[model].push(await (model === 'flex' ? flexRound : csiRound)(w, specs[model], round));
      o.onRound?.(`${backend} round ${round} ${model}`);
    }
    const flex = results.flex[round - 1];
    const csi = results.csi[round - 1];
    if (flex && csi) for (const d of diffStates(flex.state, csi.state)) if (!differences.some((x) => same(x, d))) differences.push({ ...d, round });
  }
  for (const v of Object.values(specs)) await admin(w, ['volume', 'delete', v.id]);
  w.tools.take();
  const flex = modelSteps('flex', results.flex);
  const csi = modelSteps('csi', results.csi);
  const flexCalls = results.flex.flatMap((r) => Object.values(r.steps).flat());
  return {
    backend,
    volume: { sizeBytes: specs.flex.sizeBytes, growBytesPerRound: specs.flex.growBytes, fsType: specs.flex.fsType },
    steps: STEPS.map((step) => ({ step, flex: flex[step], csi: csi[step] })),
    differences,
    state: results.flex[0] && results.csi[0] ? { flex: results.flex[0].state, csi: results.csi[0].state } : null,
    flexLogAgrees: flexCalls.every((c) => c.tools.length === (c.logged ?? []).length),
  };
}

const same = (a: Difference, b: Difference) => a.where === b.where && a.field === b.field && a.flex === b.flex && a.csi === b.csi;

/** The administrator's side (`twinvol volume create|delete`), in the scratch world; a failure stops the run. */
async function admin(w: Workbench, args: string[]): Promise<void> {
  const r = await runFlex(w.flexBin, w.flexEnv, args);
  if (r.exitCode !== 0) throw new Error(`twinvol ${args.slice(0, 3).join(' ')} failed: ${r.output.trim()}`);
}

/**
 * `twinvol compare` from the command line: a progress bar on a terminal, the table (or --json), the
 * HTML page with --html. SIGINT and SIGTERM stop the run between two calls and still clean up.
 * Returns the exit code: 0 done, 1 failed (one line on stderr).
 */
export async function runCompareCommand(o: CompareOptions): Promise<number> {
  const bar = progressBar(o.backends.length * o.rounds * 2);
  const interrupt = onInterrupt();
  try {
    const report = await runCompare({ ...o, onRound: (label) => bar.tick(label), signal: interrupt.signal });
    bar.done();
    process.stdout.write(o.json ? `${JSON.stringify(report, null, 2)}\n` : formatCompareTable(report));
    if (o.html) {
      writeFileSync(o.html, renderHtml(report));
      if (!o.json) process.stdout.write(`wrote ${o.html}\n`);
    }
    return 0;
  } catch (err) {
    bar.done();
    process.stderr.write(`twinvol compare: ${(err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ').trim()}\n`);
    return 1;
  } finally {
    interrupt.close();
  }
}
