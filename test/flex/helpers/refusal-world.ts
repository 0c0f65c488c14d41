// The world the hostile-input FlexVolume suites (test/flex/bad-input-*.test.ts) run in: a scratch per
// test, a snapshot of everything a refused call must leave as it was, and the check that a refusal is
// one clean Failure. `s` and `outsideDirs` are live bindings, set afresh before each test.
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, expect } from 'vitest';
import { mountAt } from '../../../shared/mountinfo.js';
import { FLEX_VERBS, type FlexVerb } from '../../../flex/verb-names.js';
import { type FlexResult, flexOptions, mountOptions, flexSession, podNamed } from '../../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../../helpers/kubelet-paths.js';
import { createScratch, loopsLeftUnder, loopsUnder, mountsUnder, releaseUnder, type Scratch } from '../../helpers/scratch.js';

export let s: Scratch;
/** Directories a test made outside the scratch root (symlink targets); released like the scratch. */
export let outsideDirs: string[] = [];
/** Registers the per-test scratch (and the dirs made outside it) for the calling test file. */
export function useRefusalWorld(): void {
  beforeEach(() => {
    s = createScratch('node-a');
    outsideDirs = [];
  });
  afterEach(() => {
    try {
      for (const d of outsideDirs) releaseUnder(d);
    } finally {
      s.cleanup();
    }
  });
}


export const MiB = 2 ** 20;
export const { flex, ok, createVolume } = flexSession(() => s.env);
export const pod = podNamed;

export function makeOutsideDir(): string {
  const dir = mkdtempSync('/tmp/outside-');
  outsideDirs.push(dir);
  return dir;
}

export function ls(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
}

/** Every path below `dir` with its type, without following symlinks (a link stays a link). */
export function tree(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const name of ls(dir)) {
    const path = join(dir, name);
    const st = lstatSync(path);
    const kind = st.isSymbolicLink() ? 'link' : st.isDirectory() ? 'dir' : 'file';
    out.push(`${prefix}${name}:${kind}`);
    if (kind === 'dir') out.push(...tree(path, `${prefix}${name}/`));
  }
  return out;
}

/** What a refused call must not change. Lock directories may be created lazily, but none may be left held. */
export function world() {
  const volumes = ls(join(s.dataRoot, 'volumes'));
  return {
    mounts: mountsUnder(s.root),
    loops: loopsUnder(s.root),
    dataRoot: ls(s.dataRoot).filter((n) => n !== 'locks'),
    volumes,
    attachments: Object.fromEntries(
      volumes.map((id) => [id, JSON.parse(readFileSync(join(s.dataRoot, 'volumes', id, 'volume.json'), 'utf8')).attachments.map((a: { node: string }) => a.node)]),
    ),
    pvs: ls(join(s.dataRoot, 'pvs')),
    nodeRecords: ls(join(s.stateDir, 'mounts')),
    staging: ls(join(s.stateDir, 'staging')),
    heldLocks: [...ls(join(s.dataRoot, 'locks')), ...ls(join(s.stateDir, 'locks'))].filter((n) => n.endsWith('.lock')),
    kubelet: tree(s.kubeletDir),
    scratchRoot: ls(s.root).filter((n) => n !== 'state'),
  };
}

/** One clean Failure: exactly {status, message}, exit 1, the expected fragment, nothing from Node's error printing. */
export function expectCleanFailure(r: FlexResult, fragment: string | RegExp, label: string): string {
  expect(r.reply, `${label}: ${r.output}`).toEqual({ status: 'Failure', message: expect.any(String) });
  expect(r.exitCode, label).toBe(1);
  const message = String(r.reply.message);
  if (typeof fragment === 'string') expect(message, label).toContain(fragment);
  else expect(message, label).toMatch(fragment);
  expect(r.output, label).not.toMatch(/^\s+at /m);
  expect(message, label).not.toMatch(/\n|\bat (?:\S+ \()?(?:file:\/\/|node:|\/)\S*:\d+:\d+/);
  expect(r.output, label).not.toMatch(/\b[A-Za-z]*Error:|\bE[A-Z]{3,}:|node:internal|\(node:\d+\)/);
  return message;
}

export interface Refusal {
  argv: string[];
  fragment: string | RegExp;
  /** Paths that must not exist after the call (targets, escapes). */
  absent?: string[];
}

/** Runs the calls together, checks each is a clean Failure, and that none of them changed anything. */
export async function expectRefused(...cases: Refusal[]): Promise<FlexResult[]> {
  for (const c of cases) for (const p of c.absent ?? []) expect(existsSync(p), `precondition: ${p} must not exist yet`).toBe(false);
  const before = world();
  const results = await Promise.all(cases.map((c) => flex(...c.argv)));
  results.forEach((r, i) => {
    const c = cases[i]!;
    const label = `${c.argv[0]} ${JSON.stringify(c.argv.slice(1)).slice(0, 300)}`;
    expectCleanFailure(r, c.fragment, label);
    for (const p of c.absent ?? []) expect(existsSync(p) || isLink(p), `${label}: ${p} was created`).toBe(false);
  });
  expect(world()).toEqual(before);
  expect(await loopsLeftUnder(s.root)).toEqual([]);
  return results;
}

export const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function isLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** A dir volume attached, staged at its global path and mounted into one pod: the state calls must not disturb. */
export async function mountedVolume(id = 'held') {
  await createVolume(id, '--backend', 'dir', '--size', '1Mi');
  const pv = `pv-${id}`;
  const opts = flexOptions(pv, { volumeId: id });
  await ok('attach', opts, 'node-a');
  const global = deviceMountPath(s.kubeletDir, pv);
  await ok('mountdevice', global, '', opts);
  const dir = podVolumeDir(s.kubeletDir, `uid-${id}`, pv);
  await ok('mount', dir, mountOptions(pv, pod(`uid-${id}`), { volumeId: id }));
  expect(mountAt(global)).toBeDefined();
  expect(mountAt(dir)).toBeDefined();
  return { id, pv, opts, global, dir };
}

/** Options that would make a brand-new volume if the call got that far: a refused call must not. */
export const creatingOptions = (id = 'fresh-vol', extra: Record<string, string> = {}) =>
  flexOptions(`pv-${id}`, { volumeId: id, createIfMissing: 'true', size: '16Mi', backend: 'block', ...extra });

export const ARITY: Record<FlexVerb, number> = {
  getvolumename: 1,
  attach: 2,
  isattached: 2,
  detach: 2,
  waitforattach: 2,
  mountdevice: 3,
  unmountdevice: 1,
  mount: 2,
  unmount: 1,
  expandvolume: 4,
  expandfs: 5,
};

/** The full, well-formed argv of a verb, with `json` where its options go. */
export function argvFor(verb: FlexVerb, json: string, paths: { global: string; dir: string; pv: string }): string[] {
  const sizes = [String(64 * MiB), String(16 * MiB)];
  const table: Record<FlexVerb, string[]> = {
    getvolumename: [json],
    attach: [json, 'node-a'],
    isattached: [json, 'node-a'],
    detach: [paths.pv, 'node-a'],
    waitforattach: ['', json],
    mountdevice: [paths.global, '', json],
    unmountdevice: [paths.global],
    mount: [paths.dir, json],
    unmount: [paths.dir],
    expandvolume: [json, 'relative/path', ...sizes],
    expandfs: [json, '/dev/loop0', paths.global, ...sizes],
  };
  return [verb, ...table[verb]];
}

export const JSON_VERBS = FLEX_VERBS.filter((v) => !['detach', 'unmountdevice', 'unmount'].includes(v));
