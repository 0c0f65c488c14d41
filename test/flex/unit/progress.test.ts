import { describe, expect, it } from 'vitest';
import { progressBar, stepProgress } from '../../../flex/progress.js';

/** A stand-in for stderr: what was written, and whether it claims to be a terminal. */
function stream(isTTY: boolean, columns = 0) {
  const writes: string[] = [];
  const out = { isTTY, columns, write: (s: string) => writes.push(s) > 0 } as unknown as NodeJS.WriteStream;
  return { out, writes };
}

describe('progress on a terminal (flex/progress.ts)', () => {
  it('a bar counts its steps, fits the width, and is erased at the end', () => {
    const { out, writes } = stream(true, 40);
    const bar = progressBar(2, out);
    bar.tick('dir round 1 flex');
    bar.tick('dir round 1 csi and a label far too long for forty columns');
    bar.done();
    expect(writes[0]).toBe(`\r\x1b[2K[${'.'.repeat(30)}] 0/2 starting`.slice(0, 5 + 39));
    expect(writes[1]).toContain(`[${'#'.repeat(15)}${'.'.repeat(15)}] 1/2`);
    expect(writes[2]?.length).toBe(5 + 39);
    expect(writes.at(-1)).toBe('\r\x1b[2K');
  });

  it('a step line says the step and is erased; nothing is drawn after done', () => {
    const { out, writes } = stream(true);
    const p = stepProgress(out);
    p.step?.('formatting ext4 on 2Gi');
    p.done();
    expect(writes[0]).toMatch(/^\r\x1b\[2Kformatting ext4 on 2Gi \.\.\. \d+\.\ds$/);
    expect(writes.at(-1)).toBe('\r\x1b[2K');
  });

  it('writes nothing where stderr is not a terminal, and hands out no step hook', () => {
    const { out, writes } = stream(false);
    const bar = progressBar(3, out);
    bar.tick('x');
    bar.done();
    const p = stepProgress(out);
    expect(p.step).toBeUndefined();
    p.done();
    expect(writes).toEqual([]);
  });
});
