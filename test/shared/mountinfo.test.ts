import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { isMountPoint, isReadOnly, mountAt, mountsStackedAt, mountTableCounts, parseMountInfo, readMounts, topMountAt } from '../../shared/mountinfo.js';
import { setNativeMountPath } from '../../shared/native-mount.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

const ROOT_LINE = '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro';

describe('parseMountInfo', () => {
  it('parses every field of a plain line', () => {
    expect(parseMountInfo('36 35 98:0 /mnt1 /mnt2 rw,noatime - ext3 /dev/root rw,errors=continue\n')).toEqual([
      {
        id: 36,
        parentId: 35,
        device: '98:0',
        root: '/mnt1',
        mountPoint: '/mnt2',
        mountOptions: ['rw', 'noatime'],
        fsType: 'ext3',
        source: '/dev/root',
        superOptions: ['rw', 'errors=continue'],
        propagation: [],
      },
    ]);
  });

  it('skips optional fields, however many, keeping them as its propagation', () => {
    const [one, two] = parseMountInfo(
      [
        '40 22 0:50 / /var/lib/kubelet/pods/x rw,nosuid shared:1 master:2 - tmpfs tmpfs rw,size=1024k',
        '41 22 0:51 / /a ro shared:7 master:3 propagate_from:2 unbindable - nfs4 srv:/export ro,vers=4.1',
      ].join('\n'),
    );
    expect(one).toMatchObject({ mountPoint: '/var/lib/kubelet/pods/x', fsType: 'tmpfs', source: 'tmpfs', superOptions: ['rw', 'size=1024k'] });
    expect(two).toMatchObject({ id: 41, mountPoint: '/a', mountOptions: ['ro'], fsType: 'nfs4', source: 'srv:/export' });
    expect([one?.propagation, two?.propagation]).toEqual([['shared:1', 'master:2'], ['shared:7', 'master:3', 'propagate_from:2', 'unbindable']]);
    expect(isReadOnly(two!)).toBe(true);
    expect(isReadOnly(one!)).toBe(false);
  });

  it('decodes octal escapes (space, tab, newline, backslash) in root, mount point and source', () => {
    const [e] = parseMountInfo('50 22 8:1 /data\\040dir /mnt/my\\040vol\\011tab\\012nl\\134bs rw - ext4 /dev/disk\\040x rw');
    expect(e?.root).toBe('/data dir');
    expect(e?.mountPoint).toBe('/mnt/my vol\ttab\nnl\\bs');
    expect(e?.source).toBe('/dev/disk x');
  });

  it('keeps the subtree root of a bind mount', () => {
    const [e] = parseMountInfo('60 22 8:1 /var/lib/twinvol/volumes/v1/data /var/lib/kubelet/pods/p/vol rw,relatime shared:1 - ext4 /dev/sda1 rw');
    expect(e).toMatchObject({ root: '/var/lib/twinvol/volumes/v1/data', mountPoint: '/var/lib/kubelet/pods/p/vol', source: '/dev/sda1', device: '8:1' });
  });

  it('ignores blank and malformed lines', () => {
    const entries = parseMountInfo(['', 'garbage', '1 2 3 4 5 6 7', '1 2 0:1 / /x rw - tmpfs', ROOT_LINE, ''].join('\n'));
    expect(entries.map((e) => e.mountPoint)).toEqual(['/']);
  });

  it('does not take a mount point named "-" for the separator', () => {
    const [e] = parseMountInfo('70 22 0:5 / /- rw - tmpfs none rw');
    expect(e).toMatchObject({ mountPoint: '/-', fsType: 'tmpfs', source: 'none' });
  });
});

describe('mountAt', () => {
  const stacked = parseMountInfo(
    [
      ROOT_LINE,
      '80 22 0:60 / /k/target rw - tmpfs first rw',
      '81 22 0:61 / /k/other rw - tmpfs other rw',
      '82 80 0:62 / /k/target ro - tmpfs second ro',
      '83 82 0:63 / /k/target rw - tmpfs third rw',
    ].join('\n'),
  );

  it('returns the last mount stacked at a path', () => {
    expect(mountAt('/k/target', stacked)?.source).toBe('third');
    expect(mountAt('/k/target', stacked)?.id).toBe(83);
  });

  it('matches exact paths only', () => {
    expect(mountAt('/k/other', stacked)?.source).toBe('other');
    expect(mountAt('/k', stacked)).toBeUndefined();
    expect(mountAt('/k/target/', stacked)).toBeUndefined();
    expect(mountAt('/k/targe', stacked)).toBeUndefined();
  });
});

describe('mountsStackedAt: the look-up on the table\'s text', () => {
  /** How the kernel writes a field: space, tab, newline and backslash as a backslash and three octal digits (written here on its own, not with shared/mountinfo.ts's code). */
  const kernelEscape = (v: string) => [...v].map((c) => (' \t\n\\'.includes(c) ? `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}` : c)).join('');
  // Few letters, so that paths collide, prefix each other, and turn up in other fields.
  const pathArb = fc.stringMatching(/^\/[ab \t\n\\/-]{0,6}$/);
  const lineArb = fc.record({ point: pathArb, root: pathArb, source: pathArb, optional: fc.constantFrom('', ' shared:1', ' shared:2 master:1') });

  it('finds what a parse of the whole table finds, for any table and path', () => {
    fc.assert(
      fc.property(fc.array(lineArb, { maxLength: 12 }), pathArb, fc.nat(), (lines, probe, pick) => {
        const text = `${lines.map((l, i) => `${100 + i} 22 0:${i} ${kernelEscape(l.root)} ${kernelEscape(l.point)} rw${l.optional} - tmpfs ${kernelEscape(l.source)} rw`).join('\n')}\n`;
        const table = parseMountInfo(text);
        // A path that is mounted, when there is one, as often as one picked at random.
        const path = lines.length && pick % 2 ? (lines[pick % lines.length] as { point: string }).point : probe;
        expect(mountsStackedAt(path, text)).toEqual(table.filter((m) => m.mountPoint === path));
      }),
      { numRuns: 2000 },
    );
  });

  it('compares the mount point whole, not the line', () => {
    const text = '90 22 0:70 /k/target /elsewhere rw - tmpfs /k/target rw\n91 22 0:71 / /k/target\\040x rw - tmpfs t rw\n';
    expect(mountsStackedAt('/k/target', text)).toEqual([]);
    expect(mountsStackedAt('/k/target x', text).map((m) => m.id)).toEqual([91]);
  });
});

describe('readMounts on this machine', () => {
  let s: Scratch;
  beforeEach(() => {
    s = createScratch();
  });
  afterEach(() => s.cleanup());

  it('sees a tmpfs mounted in a scratch dir, with a space in its path', () => {
    const target = join(s.root, 'mnt with space');
    mkdirSync(target);
    expect(mountAt(target)).toBeUndefined();
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'twinvol-probe', target]);
    const entry = mountAt(target, readMounts());
    expect(entry).toMatchObject({ mountPoint: target, fsType: 'tmpfs', source: 'twinvol-probe', root: '/' });
    expect(entry?.superOptions).toContain('size=1024k');
    execFileSync('umount', [target]);
    expect(mountAt(target)).toBeUndefined();
  });
});

describe('isMountPoint: the kernel asked about one path (statx through the mount addon), the table where it cannot say', () => {
  let s: Scratch;
  beforeEach(() => {
    s = createScratch();
  });
  afterEach(() => {
    setNativeMountPath(undefined);
    s.cleanup();
  });

  /** The answer, and how many times the whole table was read for it. */
  const asked = (path: string) => {
    const before = mountTableCounts.reads;
    const answer = isMountPoint(path);
    return { answer, tableReads: mountTableCounts.reads - before };
  };

  /** A tmpfs, a bind of a directory on the same filesystem as its source (same st_dev), a plain dir, a missing path, and symlinks. */
  function world() {
    const tmpfs = join(s.root, 'tmpfs');
    const bound = join(s.root, 'bound');
    const plain = join(s.root, 'plain');
    for (const d of [tmpfs, bound, plain]) mkdirSync(d);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'twinvol-probe', tmpfs]);
    execFileSync('mount', ['--bind', plain, bound]);
    symlinkSync(tmpfs, join(s.root, 'link-to-mount'));
    symlinkSync(s.root, join(s.root, 'link-to-root'));
    return {
      [tmpfs]: true,
      [bound]: true,
      [plain]: false,
      [join(s.root, 'missing')]: false,
      [join(s.root, 'missing', 'deeper')]: false,
      // Neither is a mount point the table holds, and neither is a mount point to the kernel's
      // table either: the first is a symlink, the second a path through one.
      [join(s.root, 'link-to-mount')]: false,
      [join(s.root, 'link-to-root', 'tmpfs')]: false,
    };
  }

  it('answers as the table does, for mounts, plain and missing paths and symlinks, reading it only for a path through a symlink', () => {
    const cases = world();
    for (const [path, want] of Object.entries(cases)) {
      const viaKernel = asked(path);
      expect(viaKernel.answer, path).toBe(want);
      expect(mountsStackedAt(path).length > 0, path).toBe(want);
      expect(viaKernel.tableReads, path).toBe(path.includes('link-') ? 1 : 0);
    }
    // Without the addon (TWINVOL_NATIVE_MOUNT=off), the table answers every one, the same.
    setNativeMountPath(null);
    for (const [path, want] of Object.entries(cases)) expect(asked(path), path).toEqual({ answer: want, tableReads: 1 });
  });

  it('mountAt reads the table only when the kernel has not said nothing is there', () => {
    world();
    const tmpfs = join(s.root, 'tmpfs');
    const before = mountTableCounts.reads;
    expect(mountAt(join(s.root, 'plain'))).toBeUndefined();
    expect(mountAt(join(s.root, 'missing'))).toBeUndefined();
    expect(mountTableCounts.reads - before).toBe(0);
    expect(mountAt(tmpfs)).toMatchObject({ mountPoint: tmpfs, source: 'twinvol-probe' });
    expect(mountTableCounts.reads - before).toBe(1);
  });

  it('topMountAt names the mount on top as the table does, without reading it, and nothing where the table has nothing', () => {
    const cases = world();
    const tmpfs = join(s.root, 'tmpfs');
    // A second mount stacked on the first: the top is the later one, whose parent is the first.
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'twinvol-stacked', tmpfs]);
    const tableTop = (path: string) => {
      const top = mountsStackedAt(path).at(-1);
      return top && { id: top.id, parentId: top.parentId, mountPoint: top.mountPoint };
    };
    expect(mountsStackedAt(tmpfs)).toHaveLength(2);
    for (const path of Object.keys(cases)) {
      const want = tableTop(path);
      const before = mountTableCounts.reads;
      const got = topMountAt(path);
      expect(mountTableCounts.reads - before, path).toBe(0);
      // A symlink, or a path through one, is no mount point in the table: the kernel's answer for it
      // names another path, and is not taken.
      expect(got, path).toEqual(want);
    }
    expect(topMountAt(tmpfs)?.parentId).toBe(mountsStackedAt(tmpfs)[0]?.id);
    // Without the addon there is no answer, and the caller reads the table.
    setNativeMountPath(null);
    expect(topMountAt(tmpfs)).toBeUndefined();
  });

  it('a mount hidden by a later mount over a directory above it is in the table, but not at the path', () => {
    const outer = join(s.root, 'outer');
    const inner = join(outer, 'inner');
    mkdirSync(inner, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'twinvol-hidden', inner]);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'twinvol-over', outer]);
    // What a pod or a tool reaches at the path is the upper tmpfs, where inner does not exist.
    expect(mountsStackedAt(inner).map((m) => m.source)).toEqual(['twinvol-hidden']);
    expect(asked(inner)).toEqual({ answer: false, tableReads: 0 });
  });
});
