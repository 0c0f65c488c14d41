import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/flex-runner.js';
import { expectCode } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { repeatedOk } from './helpers/repeat.js';
import { blockCap, MiB, mountCap, size } from './helpers/requests.js';

// A volume's record keeps the access requests it was created for (shared/core/access.ts), compared
// as a set on a repeated CreateVolume: another mode of the same scope is ALREADY_EXISTS.
const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl } = csi;

type Caps = ReturnType<typeof mountCap>[];
const create = (name: string, caps: Caps) => ctl('CreateVolume', { name, volume_capabilities: caps, capacity_range: size(16 * MiB) });
const recordPath = (id: string) => join(csi.s.dataRoot, 'volumes', id, 'volume.json');
const record = (id: string) => JSON.parse(readFileSync(recordPath(id), 'utf8')) as Record<string, unknown>;

describe('CreateVolume keeps the access modes, not only their scope', () => {
  it('another mode or access type of the same scope is ALREADY_EXISTS', async () => {
    await create('am-1', [mountCap()]);
    expect(await expectCode(create('am-1', [mountCap('', 'SINGLE_NODE_READER_ONLY')]), 'ALREADY_EXISTS')).toContain('access modes');
    expect(await expectCode(create('am-1', [blockCap()]), 'ALREADY_EXISTS')).toContain('access modes');
    expect(await expectCode(create('am-1', [mountCap(), blockCap()]), 'ALREADY_EXISTS')).toContain('access modes');
    expect(record('am-1').accessRequests).toEqual([{ scope: 'single-node', raw: false, readerOnly: false, singleWriter: false, fsType: '' }]);
  });

  it('the same modes in another order, or repeated, are the same volume', async () => {
    await create('am-2', [mountCap(), blockCap('SINGLE_NODE_READER_ONLY')]);
    await repeatedOk('CreateVolume', () => create('am-2', [blockCap('SINGLE_NODE_READER_ONLY'), mountCap(), mountCap()]));
  });

  it('a volume the CLI made is a filesystem written by one node: CSI may repeat that, not ask for raw block', async () => {
    expect((await runCli(csi.s.env, ['create', 'am-cli', '--size', '16Mi'])).exitCode).toBe(0);
    await create('am-cli', [mountCap()]);
    await expectCode(create('am-cli', [blockCap()]), 'ALREADY_EXISTS');
  });

  it('a record written before modes were kept is compared by its scope, as it was then', async () => {
    await create('am-old', [mountCap()]);
    const { accessRequests: _dropped, ...old } = record('am-old');
    writeFileSync(recordPath('am-old'), `${JSON.stringify(old, null, 2)}\n`);
    await create('am-old', [blockCap('SINGLE_NODE_READER_ONLY')]);
    expect(await expectCode(create('am-old', [blockCap('MULTI_NODE_READER_ONLY')]), 'ALREADY_EXISTS')).toContain('access single-node');
    expect(record('am-old')).not.toHaveProperty('accessRequests');
  });
});
