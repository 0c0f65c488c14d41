// The dispatcher's compile cache under the state dir (flex/compile-cache.ts): made by the first verb,
// used as it is by the next, and never able to change an answer, whatever is found in its place.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FLEX_BIN, flexOptions } from '../helpers/flex-runner.js';
import { createVolume, s, succeed, useKubeletWorld } from './helpers/kubelet-world.js';

useKubeletWorld();

const cacheDir = () => join(s.stateDir, 'cache');
const entries = () => readdirSync(cacheDir()).sort();
const identity = (name: string) => {
  const st = statSync(join(cacheDir(), name));
  return `${st.ino}:${st.mtimeMs}:${st.size}`;
};

describe('the dispatcher compile cache', () => {
  it('is left by the first verb, used unchanged by the next, and private to root', async () => {
    await createVolume('vol-c', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-c', { volumeId: 'vol-c' });
    expect(existsSync(cacheDir())).toBe(false);
    expect(await succeed(['getvolumename', opts])).toEqual({ status: 'Success', volumeName: 'vol-c' });
    const kinds = () => entries().map((n) => n.replace(/^[0-9a-f]+-v[\d.]+-\d+-\d+-\d+\./, ''));
    expect(kinds()).toEqual(['dispatch.getvolumename.v8', 'dispatch.js']);
    expect(statSync(cacheDir()).mode & 0o777).toBe(0o700);
    for (const n of entries()) expect(statSync(join(cacheDir(), n)).mode & 0o777).toBe(0o600);
    const before = entries().map(identity);
    // Another verb adds its own V8 data beside the same source, which it leaves as it is.
    expect(await succeed(['isattached', opts, 'node-a'])).toEqual({ status: 'Success', attached: false });
    expect(kinds()).toEqual(['dispatch.getvolumename.v8', 'dispatch.isattached.v8', 'dispatch.js']);
    const both = entries().map(identity);
    expect(both.filter((id) => before.includes(id))).toEqual(before);
    expect(await succeed(['isattached', opts, 'node-a'])).toEqual({ status: 'Success', attached: false });
    expect(await succeed(['getvolumename', opts])).toEqual({ status: 'Success', volumeName: 'vol-c' });
    // Accepted by V8 and not rewritten: the same files, untouched.
    expect(entries().map(identity)).toEqual(both);
  });

  it('a damaged or foreign cache changes no answer, is made anew, and old entries go', async () => {
    await createVolume('vol-d', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-d', { volumeId: 'vol-d' });
    await succeed(['getvolumename', opts]);
    const [v8, js] = entries().map((n) => join(cacheDir(), n)) as [string, string];
    const good = readFileSync(js);
    const owner = readdirSync(cacheDir())[0]!.split('-')[0]!;
    writeFileSync(join(cacheDir(), `${owner}-v0.0.0-1-2-3.dispatch.js`), 'an entry of a build since replaced');
    writeFileSync(join(cacheDir(), 'abcdef-v0.0.0-1-2-3.dispatch.js'), 'an entry of another executable');
    const damages: [string, () => void][] = [
      ['V8 data of garbage', () => writeFileSync(v8, 'not a code cache')],
      ['a source cut in half', () => truncateSync(js, good.length >> 1)],
      // Valid JavaScript: had it been run, every call would break. V8 refuses the data beside it.
      ['a source replaced by another module', () => writeFileSync(js, 'exports.dispatch = undefined;')],
    ];
    for (const [what, damage] of damages) {
      damage();
      const reply = await succeed(['getvolumename', opts]);
      expect(reply, what).toEqual({ status: 'Success', volumeName: 'vol-d' });
    }
    // Each time from the executable's own copy, rewritten at exit.
    expect(readFileSync(js).equals(good)).toBe(true);
    // A verb with no data of its own never trusts the source it finds: it runs its own copy and puts it back.
    writeFileSync(js, 'exports.dispatch = undefined;');
    expect(await succeed(['isattached', opts, 'node-a'])).toEqual({ status: 'Success', attached: false });
    expect(readFileSync(js).equals(good)).toBe(true);
    rmSync(v8.replace('.getvolumename.v8', '.isattached.v8'));
    expect(entries()).toHaveLength(3);
    expect(entries()).toContain('abcdef-v0.0.0-1-2-3.dispatch.js');
  });

  it("a temporary file a killed call left goes once it is a minute old; a live call's stays", async () => {
    await createVolume('vol-t', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-t', { volumeId: 'vol-t' });
    await succeed(['getvolumename', opts]);
    const [v8, js] = entries().map((n) => join(cacheDir(), n)) as [string, string];
    const abandoned = `${js}.999999.tmp`;
    const writing = `${v8}.999998.tmp`;
    writeFileSync(abandoned, 'half a source');
    writeFileSync(writing, 'half a code cache');
    const twoMinutesAgo = new Date(Date.now() - 120_000);
    utimesSync(abandoned, twoMinutesAgo, twoMinutesAgo);
    // A cache V8 refuses makes the next call write it again, and sweep as it does.
    writeFileSync(v8, 'not a code cache');
    expect(await succeed(['getvolumename', opts])).toEqual({ status: 'Success', volumeName: 'vol-t' });
    expect(existsSync(abandoned)).toBe(false);
    expect(existsSync(writing)).toBe(true);
  });

  it('is not touched by init or by a human at the CLI', () => {
    execFileSync(FLEX_BIN, ['init'], { env: s.env });
    execFileSync(FLEX_BIN, ['--version'], { env: s.env });
    expect(existsSync(cacheDir())).toBe(false);
  });
});
