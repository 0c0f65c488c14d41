import { existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { flexSession, mountOptions, podNamed, runFlex } from '../helpers/flex-runner.js';
import { podVolumeDir } from '../helpers/kubelet-paths.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

// A PV writer is not the node's administrator (issue 8, defect 5): a static source that is a host path
// comes from `twinvol volume create`, or from under a root listed in staticSourceRoots.
let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => s.cleanup());

const { ok, createVolume } = flexSession(() => s.env);
const useConfig = (settings: Record<string, unknown>) => writeFileSync(s.env.TWINVOL_CONFIG!, JSON.stringify({ flexAttach: false, ...settings }));
const pvBind = (pv: string, source: string) =>
  mountOptions(pv, podNamed('uid-1'), { volumeId: pv, createIfMissing: 'true', backend: 'static', source, fsType: 'none', mountOptions: 'bind' });

describe('a static host-path source chosen in a PV', () => {
  it('source "/" with a bind from PV options is refused, and nothing is created or mounted', async () => {
    useConfig({});
    const target = podVolumeDir(s.kubeletDir, 'uid-1', 'pv-root');
    const r = await runFlex(s.env, ['mount', target, pvBind('pv-root', '/')]);
    expect(r.exitCode).toBe(1);
    expect(r.reply).toEqual({
      status: 'Failure',
      message: 'static source / is a host path: only an administrator may choose one (twinvol volume create), or list a root that holds it in the staticSourceRoots setting',
    });
    expect(existsSync(join(s.dataRoot, 'volumes', 'pv-root'))).toBe(false);
    expect(mountAt(target)).toBeUndefined();
  });

  it('is allowed under a listed root, and a symlink there that leads out is refused at mount', async () => {
    const shares = join(s.root, 'shares');
    mkdirSync(join(shares, 'team-a'), { recursive: true });
    symlinkSync('/', join(shares, 'escape'));
    useConfig({ staticSourceRoots: [shares] });

    const good = podVolumeDir(s.kubeletDir, 'uid-1', 'pv-a');
    await ok('mount', good, pvBind('pv-a', join(shares, 'team-a')));
    writeFileSync(join(good, 'x'), 'y');
    expect(existsSync(join(shares, 'team-a', 'x'))).toBe(true);
    await ok('unmount', good);

    const bad = podVolumeDir(s.kubeletDir, 'uid-1', 'pv-esc');
    const r = await runFlex(s.env, ['mount', bad, pvBind('pv-esc', join(shares, 'escape'))]);
    expect(r.reply).toEqual({ status: 'Failure', message: `static source ${join(shares, 'escape')} leads to /, outside the allowed staticSourceRoots` });
    expect(mountAt(bad)).toBeUndefined();
  });

  it('the administrator may still choose any host path with twinvol volume create', async () => {
    useConfig({});
    const dir = join(s.root, 'anywhere');
    mkdirSync(dir);
    await createVolume('admin-made', '--backend', 'static', '--source', dir, '--fs-type', 'none', '--mount-options', 'bind');
    const target = podVolumeDir(s.kubeletDir, 'uid-1', 'pv-admin');
    await ok('mount', target, mountOptions('pv-admin', podNamed('uid-1'), { volumeId: 'admin-made' }));
    expect(mountAt(target)).toBeDefined();
    await ok('unmount', target);
  });
});
