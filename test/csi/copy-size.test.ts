import { closeSync, openSync, readSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectCode } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { blockCap, GiB, MiB, size } from './helpers/requests.js';

/**
 * The size of a volume made from a snapshot or another volume, as CSI asks (csi/proto/csi.proto
 * CreateVolumeRequest.capacity_range): without a capacity_range the size is the plugin's to choose, and
 * a copy takes its source's size where that is larger than twinvol's default (10 GiB, csi/capacity.ts);
 * a range that was given is honoured, so a size below the source's is OUT_OF_RANGE. Raw block volumes
 * (sparse images, no mkfs) keep a 12 GiB source free.
 */
const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl } = csi;
const cap = blockCap();
const SOURCE = 12 * GiB;
const DEFAULT = 10 * GiB;
const MARK = Buffer.from('the last 4 KiB of the source image\n'.padEnd(4096, '.'));

const image = (id: string) => join(csi.s.dataRoot, 'volumes', id, 'image.img');

/** Bytes of a volume's image at `offset`, read from the catalog as the node would see them. */
function readAt(id: string, offset: number, length: number): Buffer {
  const fd = openSync(image(id), 'r');
  try {
    const buf = Buffer.alloc(length);
    readSync(fd, buf, 0, length, offset);
    return buf;
  } finally {
    closeSync(fd);
  }
}

const fromSnapshot = { snapshot: { snapshot_id: 'big-snap' } };
const fromVolume = { volume: { volume_id: 'big-src' } };

describe('a copy of a source larger than the default size', () => {
  it('takes the source size when no capacity_range is given, from a snapshot and from a volume, and repeats', async () => {
    await ctl('CreateVolume', { name: 'big-src', volume_capabilities: [cap], capacity_range: size(SOURCE) });
    // A mark in the source's last block: a copy cut to the default size would not hold it.
    const fd = openSync(image('big-src'), 'r+');
    try {
      writeSync(fd, MARK, 0, MARK.length, SOURCE - MARK.length);
    } finally {
      closeSync(fd);
    }
    await ctl('CreateSnapshot', { name: 'big-snap', source_volume_id: 'big-src' });

    for (const [name, source] of [['restored', fromSnapshot], ['cloned', fromVolume]] as const) {
      const request = { name, volume_capabilities: [cap], volume_content_source: source };
      const made = await ctl('CreateVolume', request);
      expect(made.volume.capacity_bytes, name).toBe(String(SOURCE));
      expect(statSync(image(name)).size, name).toBe(SOURCE);
      expect(readAt(name, SOURCE - MARK.length, MARK.length).equals(MARK), `${name} holds the source's last block`).toBe(true);
      // Repeated as a CO retries it: the same volume, not AlreadyExists for a size it never asked.
      const again = await ctl('CreateVolume', request);
      expect(again.volume).toEqual(made.volume);
    }
  });

  it('honours a range that was given: a limit above the source, the source size; a range below it, OUT_OF_RANGE', async () => {
    const limited = await ctl('CreateVolume', { name: 'under-limit', volume_capabilities: [cap], capacity_range: { limit_bytes: String(20 * GiB) }, volume_content_source: fromSnapshot });
    expect(limited.volume.capacity_bytes).toBe(String(SOURCE));
    const refused: [string, { required_bytes?: string; limit_bytes?: string }][] = [
      ['required-below', size(11 * GiB)],
      ['limit-below', { limit_bytes: String(11 * GiB) }],
    ];
    for (const [name, range] of refused) {
      for (const source of [fromSnapshot, fromVolume]) {
        const message = await expectCode(ctl('CreateVolume', { name, volume_capabilities: [cap], capacity_range: range, volume_content_source: source }), 'OUT_OF_RANGE');
        expect(message, name).toMatch(/holds 12884901888 bytes, more than the 11811160064 bytes requested/);
      }
      await expectCode(ctl('ControllerGetVolume', { volume_id: name }), 'NOT_FOUND');
    }
  });

  it('keeps the default size for a copy of a source smaller than it', async () => {
    await ctl('CreateVolume', { name: 'small-src', volume_capabilities: [cap], capacity_range: size(64 * MiB) });
    await ctl('CreateSnapshot', { name: 'small-snap', source_volume_id: 'small-src' });
    const made = await ctl('CreateVolume', { name: 'small-copy', volume_capabilities: [cap], volume_content_source: { snapshot: { snapshot_id: 'small-snap' } } });
    expect(made.volume.capacity_bytes).toBe(String(DEFAULT));
    expect(statSync(image('small-copy')).size).toBe(DEFAULT);
  });
});
