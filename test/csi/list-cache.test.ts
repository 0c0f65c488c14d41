import { rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { expectSuccess, flexOptions, runCli, runFlex } from '../helpers/flex-runner.js';
import { useCsiServer } from './helpers/fixture.js';

/**
 * ListVolumes answers from records the server keeps once their files are 2 s old, each checked by one
 * stat (shared/store/catalog.ts listedVolume). The catalog is also written by other processes: the
 * FlexVolume executable and the admin CLI. Each of their changes must show in the very next listing.
 */
const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl } = csi;

interface Listed {
  nodes: string[];
  abnormal: boolean | undefined;
  capacity: string;
}

async function listing(pageSize = 0): Promise<Map<string, Listed>> {
  const out = new Map<string, Listed>();
  let token = '';
  do {
    const page = await ctl('ListVolumes', { max_entries: pageSize, starting_token: token });
    for (const e of page.entries)
      out.set(e.volume!.volume_id, { nodes: e.status!.published_node_ids, abnormal: e.status!.volume_condition?.abnormal, capacity: e.volume!.capacity_bytes });
    token = page.next_token;
  } while (token);
  return out;
}

const cli = async (...args: string[]) => {
  const r = await runCli(csi.s.env, args);
  expect(r.exitCode, r.stderr).toBe(0);
};

describe('ListVolumes over kept records', () => {
  it('shows at once what FlexVolume and the admin CLI change in the catalog', async () => {
    for (const id of ['lc-a', 'lc-b', 'lc-c']) await cli('create', id, '--backend', 'dir', '--size', '1Mi');
    await sleep(2_100);
    const healthy = { nodes: [], abnormal: false, capacity: String(1 << 20) };
    const before = new Map([['lc-a', healthy], ['lc-b', healthy], ['lc-c', healthy]]);
    // The first listing reads the settled records and keeps them; the second answers from them.
    expect(await listing()).toEqual(before);
    expect(await listing()).toEqual(before);
    expect(await listing(1)).toEqual(before);

    expectSuccess(await runFlex(csi.s.env, ['attach', flexOptions('pv-a', { volumeId: 'lc-a' }), 'node-a']));
    expect((await listing()).get('lc-a')?.nodes).toEqual(['node-a']);
    expect((await listing(2)).get('lc-a')?.nodes).toEqual(['node-a']);
    expectSuccess(await runFlex(csi.s.env, ['detach', 'pv-a', 'node-a']));
    expect((await listing()).get('lc-a')?.nodes).toEqual([]);

    // The volume's data is not part of its record: its condition is looked at on every listing.
    rmSync(`${csi.s.dataRoot}/volumes/lc-b/data`, { recursive: true });
    expect((await listing()).get('lc-b')?.abnormal).toBe(true);

    await cli('delete', 'lc-c');
    await cli('create', 'lc-d', '--backend', 'dir', '--size', '2Mi');
    expect([...(await listing()).keys()]).toEqual(['lc-a', 'lc-b', 'lc-d']);
    expect((await listing()).get('lc-d')?.capacity).toBe(String(2 << 20));
  });
});
