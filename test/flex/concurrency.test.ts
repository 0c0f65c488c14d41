// Many executable processes at once, as kubelet and the controller-manager run them: calls on different
// volumes in parallel, mounts and unmounts of one volume's pods in parallel (attach:false), attach races.
// Every reply must be Success JSON, and the records, attachments, loop devices and locks must add up.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { type FlexResult, flexOptions, mountOptions, runCli, runFlex } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { createScratch, loopsLeftUnder, loopsUnder, mountsUnder, type Scratch } from '../helpers/scratch.js';

let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => s.cleanup());

const PODS_PER_VOLUME = 4;
const BLOCK = ['blk-0', 'blk-1', 'blk-2', 'blk-3'];
const DIR = ['dir-0', 'dir-1', 'dir-2', 'dir-3'];
const VOLUMES = [...BLOCK, ...DIR];

const flex = (...argv: string[]) => runFlex(s.env, argv);
const pvOf = (id: string) => `pv-${id}`;
const podUid = (id: string, i: number) => `${id}-pod-${i}`;
const podDir = (id: string, i: number) => podVolumeDir(s.kubeletDir, podUid(id, i), pvOf(id));
const podDirs = (id: string) => Array.from({ length: PODS_PER_VOLUME }, (_, i) => podDir(id, i));

async function createVolumes(): Promise<void> {
  const made = await Promise.all([
    ...BLOCK.map((id) => runCli(s.env, ['create', id, '--size', '32Mi'])),
    ...DIR.map((id) => runCli(s.env, ['create', id, '--backend', 'dir', '--size', '8Mi'])),
  ]);
  expect(made.map((r) => `${r.exitCode}:${r.stderr}`)).toEqual(VOLUMES.map(() => '0:'));
}

/** Runs all calls at once; every one must be a Success reply with exit 0 (the failures are listed if not). */
async function allSucceed(calls: string[][]): Promise<FlexResult[]> {
  const results = await Promise.all(calls.map((argv) => flex(...argv)));
  const bad = results.flatMap((r, i) =>
    r.exitCode === 0 && r.reply.status === 'Success' ? [] : [`${calls[i]![0]} ${calls[i]![1]}: exit ${r.exitCode} ${r.output}`],
  );
  expect(bad).toEqual([]);
  return results;
}

function mountCalls(): string[][] {
  return VOLUMES.flatMap((id) =>
    podDirs(id).map((dir, i) => ['mount', dir, mountOptions(pvOf(id), { uid: podUid(id, i), name: `pod-${i}` }, { volumeId: id })]),
  );
}

interface Rec {
  volumeId: string;
  path: string;
  kind: 'stage' | 'publish';
  implicit?: boolean;
  stagingPath?: string;
}

function nodeRecords(): Rec[] {
  const dir = join(s.stateDir, 'mounts');
  if (!existsSync(dir)) return [];
  return readdirSync(dir).map((n) => JSON.parse(readFileSync(join(dir, n), 'utf8')) as Rec);
}

function attachmentsOf(id: string): string[] {
  const v = JSON.parse(readFileSync(join(s.dataRoot, 'volumes', id, 'volume.json'), 'utf8')) as { attachments: { node: string }[] };
  return v.attachments.map((a) => a.node);
}

/** Lock directories still present: every lock is released (its directory removed) when a call ends. */
function heldLocks(): string[] {
  const out: string[] = [];
  for (const dir of [join(s.stateDir, 'locks'), join(s.dataRoot, 'locks')]) {
    if (!existsSync(dir)) continue;
    out.push(...readdirSync(dir).filter((n) => n.endsWith('.lock')).map((n) => join(dir, n)));
  }
  return out;
}

/**
 * The state after every pod of every volume is mounted: from one staging per volume, or, for a dir
 * volume with no staging (`stage` answers undefined), each pod straight from the volume's directory.
 */
function expectAllPublished(stage: (id: string) => { path: string; implicit: boolean } | undefined): void {
  const records = nodeRecords();
  const staged = VOLUMES.filter((id) => stage(id));
  expect(records).toHaveLength(VOLUMES.length * PODS_PER_VOLUME + staged.length);
  for (const id of VOLUMES) {
    const mine = records.filter((r) => r.volumeId === id);
    const stages = mine.filter((r) => r.kind === 'stage');
    const publishes = mine.filter((r) => r.kind === 'publish');
    const want = stage(id);
    expect(stages.map((r) => [r.path, Boolean(r.implicit)]), id).toEqual(want ? [[want.path, want.implicit]] : []);
    expect(publishes.map((r) => r.path).sort(), id).toEqual(podDirs(id).sort());
    expect(new Set(publishes.map((r) => r.stagingPath)), id).toEqual(new Set([want?.path]));
    expect(attachmentsOf(id), id).toEqual(['node-a']);
    if (want) expect(mountAt(want.path), `${id} staging`).toBeDefined();
    for (const dir of podDirs(id)) expect(mountAt(dir), dir).toBeDefined();
  }
  for (const id of BLOCK) {
    const loops = loopsUnder(join(s.dataRoot, 'volumes', id));
    expect(loops, id).toHaveLength(1);
    expect(mountAt(stage(id)!.path)?.source, id).toBe(loops[0]);
  }
  for (const id of DIR) expect(loopsUnder(join(s.dataRoot, 'volumes', id)), id).toEqual([]);
  expect(loopsUnder(s.root)).toHaveLength(BLOCK.length);
  // One mount per staging and per pod, nothing stacked twice.
  expect(mountsUnder(s.root)).toHaveLength(VOLUMES.length * PODS_PER_VOLUME + staged.length);
}

/** A file written through one pod is read through the others, and no other volume sees it. */
function expectSharedData(): void {
  for (const id of VOLUMES) {
    const [first, ...rest] = podDirs(id);
    writeFileSync(join(first!, 'written-by-pod-0.txt'), `data of ${id}`);
    for (const dir of rest) expect(readFileSync(join(dir, 'written-by-pod-0.txt'), 'utf8'), dir).toBe(`data of ${id}`);
  }
  for (const id of VOLUMES) {
    for (const dir of podDirs(id)) {
      const names = readdirSync(dir).filter((n) => n !== 'lost+found');
      expect(names, dir).toEqual(['written-by-pod-0.txt']);
      expect(readFileSync(join(dir, 'written-by-pod-0.txt'), 'utf8')).toBe(`data of ${id}`);
    }
  }
}

async function expectNothingLeft(): Promise<void> {
  expect(mountsUnder(s.root)).toEqual([]);
  expect(await loopsLeftUnder(s.root)).toEqual([]);
  expect(nodeRecords()).toEqual([]);
  for (const id of VOLUMES) expect(attachmentsOf(id), id).toEqual([]);
  for (const id of VOLUMES) for (const dir of podDirs(id)) expect(existsSync(dir), dir).toBe(false);
  expect(heldLocks()).toEqual([]);
}

describe('non-attachable: mount alone does the whole node side', () => {
  beforeEach(() => writeFileSync(s.env.TWINVOL_CONFIG!, JSON.stringify({ flexAttach: false })));

  it('32 concurrent mounts of 8 volumes (4 pods each), then 32 concurrent unmounts', async () => {
    await createVolumes();
    await allSucceed(mountCalls());
    // A dir volume binds its directory into each pod; a block volume mounts its filesystem once.
    expectAllPublished((id) => (DIR.includes(id) ? undefined : { path: join(s.stateDir, 'staging', id), implicit: true }));
    expectSharedData();
    expect(heldLocks()).toEqual([]);

    await allSucceed(VOLUMES.flatMap((id) => podDirs(id).map((dir) => ['unmount', dir])));
    await expectNothingLeft();
    expect(existsSync(join(s.stateDir, 'staging')) ? readdirSync(join(s.stateDir, 'staging')) : []).toEqual([]);

    // The data outlived the mounts: a new pod of each volume finds it.
    await allSucceed(VOLUMES.map((id) => ['mount', podDir(id, 0), mountOptions(pvOf(id), { uid: podUid(id, 0), name: 'again' }, { volumeId: id })]));
    for (const id of VOLUMES) expect(readFileSync(join(podDir(id, 0), 'written-by-pod-0.txt'), 'utf8')).toBe(`data of ${id}`);
    await allSucceed(VOLUMES.map((id) => ['unmount', podDir(id, 0)]));
    await expectNothingLeft();
  });
});

describe('attachable: attach, waitforattach, mountdevice, then pods', () => {
  it('stages 8 volumes in parallel, mounts 32 pods at once, and tears everything down concurrently', async () => {
    await createVolumes();
    const opts = (id: string) => flexOptions(pvOf(id), { volumeId: id });
    const global = (id: string) => deviceMountPath(s.kubeletDir, pvOf(id));

    // Each volume's sequence is ordered, the 8 sequences run side by side.
    const devices = await Promise.all(
      VOLUMES.map(async (id) => {
        const [attached] = await allSucceed([['attach', opts(id), 'node-a']]);
        expect(attached!.reply.device).toBe('');
        const [waited] = await allSucceed([['waitforattach', '', opts(id)]]);
        const device = String(waited!.reply.device ?? '');
        await allSucceed([['mountdevice', global(id), device, opts(id)]]);
        return [id, device] as const;
      }),
    );
    for (const [id, device] of devices) {
      if (BLOCK.includes(id)) {
        expect(device, id).toMatch(/^\/dev\/loop\d+$/);
        expect(loopsUnder(join(s.dataRoot, 'volumes', id)), id).toEqual([device]);
      } else {
        expect(device, id).toBe('');
      }
    }
    expect(new Set(devices.filter(([id]) => BLOCK.includes(id)).map(([, d]) => d)).size).toBe(BLOCK.length);
    expect(nodeRecords()).toHaveLength(VOLUMES.length);

    await allSucceed(mountCalls());
    expectAllPublished((id) => ({ path: global(id), implicit: false }));
    expectSharedData();
    expect(heldLocks()).toEqual([]);

    await allSucceed(VOLUMES.flatMap((id) => podDirs(id).map((dir) => ['unmount', dir])));
    // The pods are gone; the global mounts, their devices and attachments stay until unmountdevice/detach.
    expect(nodeRecords().map((r) => r.kind)).toEqual(VOLUMES.map(() => 'stage'));
    expect(mountsUnder(s.root).sort()).toEqual(VOLUMES.map(global).sort());
    expect(loopsUnder(s.root)).toHaveLength(BLOCK.length);
    for (const id of VOLUMES) expect(attachmentsOf(id), id).toEqual(['node-a']);

    await allSucceed(VOLUMES.map((id) => ['unmountdevice', global(id)]));
    expect(mountsUnder(s.root)).toEqual([]);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
    expect(nodeRecords()).toEqual([]);
    for (const id of VOLUMES) expect(attachmentsOf(id), id).toEqual(['node-a']);

    await allSucceed(VOLUMES.map((id) => ['detach', pvOf(id), 'node-a']));
    await expectNothingLeft();
  });
});

describe('attach race', () => {
  it('16 concurrent attaches of one single-node volume to 16 nodes: one wins, 15 name the winner', async () => {
    const made = await runCli(s.env, ['create', 'solo', '--size', '16Mi']);
    expect(made.exitCode).toBe(0);
    const opts = flexOptions('pv-solo', { volumeId: 'solo' });
    const nodes = Array.from({ length: 16 }, (_, i) => `node-${String(i).padStart(2, '0')}`);
    const results = await Promise.all(nodes.map((node) => flex('attach', opts, node)));

    const winners = nodes.filter((_, i) => results[i]!.reply.status === 'Success');
    expect(winners).toHaveLength(1);
    const winner = winners[0]!;
    const winnerResult = results[nodes.indexOf(winner)]!;
    expect(winnerResult.exitCode).toBe(0);
    expect(winnerResult.reply).toEqual({ status: 'Success', device: '' });

    const losers = results.filter((r) => r !== winnerResult);
    expect(losers).toHaveLength(15);
    for (const r of losers) {
      expect(r.exitCode).toBe(1);
      expect(r.reply).toEqual({
        status: 'Failure',
        message: `volume solo is attached to node ${winner}; a single-node volume attaches to one node at a time`,
      });
    }
    expect(attachmentsOf('solo')).toEqual([winner]);
    expect(heldLocks()).toEqual([]);

    // The controller-manager's view agrees: only the winner holds it.
    const checks = await Promise.all(nodes.map((node) => flex('isattached', opts, node)));
    expect(checks.map((r) => r.reply.attached)).toEqual(nodes.map((n) => n === winner));
  });
});
