import { describe, expect, it } from 'vitest';
import { type CompareReport, formatCompareTable, median, modelSteps, p95, workNames } from '../../flex/compare/report.js';
import { diffStates, type VolumeState } from '../../flex/compare/state.js';
import type { RoundResult } from '../../flex/compare/workload.js';

/** The pure halves of `twinvol compare`: the state diff, with differences planted, and the figures. */
function published(): VolumeState {
  const mount = { device: 'loop:<volume>/image.img', fsType: 'ext4', mountOptions: ['relatime', 'rw'], superOptions: ['rw'], readOnly: false };
  return {
    staging: { mount: { ...mount }, uid: 0, gid: 2000, mode: '2775' },
    stagedByRecord: false,
    target: { mount: { ...mount }, uid: 0, gid: 2000, mode: '2775' },
    sizeBytes: 62_000_000,
  };
}

describe('diffStates', () => {
  it('finds nothing between two equal states', () => {
    expect(diffStates(published(), published())).toEqual([]);
  });

  it('names a read-only pod mount, with both values', () => {
    const csi = published();
    if (!csi.target.mount) throw new Error('no mount');
    csi.target.mount = { ...csi.target.mount, mountOptions: ['relatime', 'ro'], readOnly: true };
    expect(diffStates(published(), csi)).toEqual([
      { where: 'target', field: 'mountOptions', flex: 'relatime,rw', csi: 'relatime,ro' },
      { where: 'target', field: 'readOnly', flex: 'false', csi: 'true' },
    ]);
  });

  it('names another device, filesystem, owner, mode and size', () => {
    const csi = published();
    if (!csi.staging?.mount) throw new Error('no mount');
    csi.staging.mount = { ...csi.staging.mount, device: '/dev/sdb', fsType: 'xfs' };
    csi.target = { ...csi.target, uid: 1000, mode: '0755' };
    csi.sizeBytes = 1;
    expect(diffStates(published(), csi).map((d) => `${d.where}.${d.field}`)).toEqual(['staging.device', 'staging.fsType', 'target.owner', 'target.mode', 'volume.sizeBytes']);
  });

  it("names a staging left unmounted, unless it is that model's record alone (a dir volume under CSI); never a target", () => {
    const csi = published();
    if (!csi.staging) throw new Error('no staging');
    csi.staging = { ...csi.staging, mount: null, mode: '0750' };
    expect(diffStates(published(), csi)).toEqual([
      { where: 'staging', field: 'mounted', flex: 'true', csi: 'false' },
      { where: 'staging', field: 'mode', flex: '2775', csi: '0750' },
    ]);
    // The other model's staging being its record alone hides nothing of this one's.
    expect(diffStates({ ...published(), stagedByRecord: true }, csi).map((d) => `${d.where}.${d.field}`)).toEqual(['staging.mounted', 'staging.mode']);
    csi.stagedByRecord = true;
    expect(diffStates(published(), csi)).toEqual([]);
    csi.target = { ...csi.target, mount: null };
    expect(diffStates(published(), csi)).toEqual([{ where: 'target', field: 'mounted', flex: 'true', csi: 'false' }]);
  });

  it('names a staging one model has and the other has not, and a target left unmounted', () => {
    const csi = published();
    csi.staging = null;
    csi.target = { ...csi.target, mount: null };
    expect(diffStates(published(), csi)).toEqual([
      { where: 'staging', field: 'present', flex: 'true', csi: 'false' },
      { where: 'target', field: 'mounted', flex: 'true', csi: 'false' },
    ]);
  });
});

describe('figures', () => {
  it('median and nearest-rank p95', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(p95([5])).toBe(5);
    expect(p95(Array.from({ length: 20 }, (_, i) => i + 1))).toBe(19);
    expect(p95(Array.from({ length: 100 }, (_, i) => 100 - i))).toBe(95);
  });

  it('counts the executable itself for FlexVolume, only the tools for CSI, and keeps a failed expansion', () => {
    const round = (model: 'flex' | 'csi'): RoundResult => ({
      state: published(),
      steps: {
        stage: [{ call: model === 'flex' ? 'mountdevice' : 'NodeStageVolume', ms: 10, tools: ['mount', 'blkid'], systemCalls: ['mount', 'mount:EINVAL'] }],
        expand: [{ call: 'grow', ms: 5, tools: [], systemCalls: [], error: 'not permitted' }],
      },
    });
    const flex = modelSteps('flex', [round('flex'), round('flex')]);
    const csi = modelSteps('csi', [round('csi'), round('csi')]);
    expect(flex.stage.processes).toEqual([3, 3]);
    expect(csi.stage.processes).toEqual([2, 2]);
    expect(csi.stage.tools).toEqual({ mount: 2, blkid: 2 });
    // System calls run no process: listed, not counted as processes.
    expect(csi.stage.systemCalls).toEqual({ mount: 2, 'mount:EINVAL': 2 });
    expect(workNames(csi.stage)).toEqual([['mount', 2], ['blkid', 2], ['mount(2)', 2], ['mount(2):EINVAL', 2]]);
    expect(flex.expand).toMatchObject({ supported: true, failedRounds: 2, errors: ['not permitted'] });
    expect(flex.stats).toMatchObject({ supported: false, latencyMs: null, processes: [] });
    expect(flex.stats.note).toMatch(/no stats call/);
  });

  it('the table lists a planted difference', () => {
    const report: CompareReport = {
      command: 'twinvol compare',
      startedAt: '2026-01-01T00:00:00.000Z',
      node: 'n',
      rounds: 1,
      method: { latency: '', processes: '', tools: '', state: '', order: '' },
      csiStartMs: 1,
      backends: [
        {
          backend: 'block',
          volume: { sizeBytes: 64 * 2 ** 20, growBytesPerRound: 0, fsType: 'ext4' },
          steps: [],
          differences: [{ where: 'target', field: 'readOnly', flex: 'false', csi: 'true', round: 1 }],
          state: null,
          flexLogAgrees: true,
        },
      ],
    };
    expect(formatCompareTable(report)).toContain('  target readOnly: flex "false", csi "true" (round 1)');
  });
});
