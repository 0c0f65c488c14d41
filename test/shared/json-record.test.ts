import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as v from 'valibot';
import { readRecord, removeRecord, SCHEMA_VERSION, type Versioned, writeLockedRecord, writeRecord } from '../../shared/store/json-record.js';
import { RECORD_SCHEMAS, strict } from '../../shared/store/record-schemas.js';
import { expectRejects } from './expect-error.js';

interface Rec extends Versioned {
  name: string;
  payload?: string;
}
const REC = strict({ schema: v.number(), name: v.string(), payload: v.optional(v.string()) });

let dir: string;
beforeEach(() => {
  dir = mkdtempSync('/tmp/twinvol-test-record-');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("a killed writer's temporary file (SIGKILL skips writeRecord's cleanup)", () => {
  // What the FlexVolume crash suite found after a mount killed mid-write: `<record>.<number>` beside it.
  const leftovers = ['rec.json.1158888644', 'rec.json.7'];
  const strangers = ['rec.json.bak', 'rec.json.12x', 'other.json.1158888644', 'rec.json.12345678901'];
  beforeEach(() => {
    for (const n of [...leftovers, ...strangers]) writeFileSync(join(dir, n), '{"schema":');
  });

  it('goes when the record is written again under its lock; other files stay', async () => {
    await writeLockedRecord<Rec>(join(dir, 'rec.json'), { schema: 1, name: 'again' });
    expect(readdirSync(dir).sort()).toEqual(['rec.json', ...strangers].sort());
  });

  it('goes when the record is removed; other files stay', async () => {
    writeFileSync(join(dir, 'rec.json'), '{}');
    await removeRecord(join(dir, 'rec.json'));
    expect(readdirSync(dir).sort()).toEqual([...strangers].sort());
  });

  it('removing a record whose directory is gone is fine', async () => {
    await expect(removeRecord(join(dir, 'gone', 'rec.json'))).resolves.toBeUndefined();
  });
});

describe('writeRecord / readRecord', () => {
  it('round-trips a record, making parent directories, as pretty JSON with a final newline and mode 0600', async () => {
    const path = join(dir, 'a', 'b', 'rec.json');
    const rec: Rec = { schema: SCHEMA_VERSION, name: 'vol-1', payload: 'ü\n"quoted"' };
    await writeRecord(path, rec);
    expect(await readRecord(path, REC)).toEqual(rec);
    const text = readFileSync(path, 'utf8');
    expect(text).toBe(`${JSON.stringify(rec, null, 2)}\n`);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'a', 'b')).mode & 0o777).toBe(0o700);
  });

  it('replaces a record and leaves no temporary file beside it', async () => {
    const path = join(dir, 'rec.json');
    await writeRecord<Rec>(path, { schema: 1, name: 'first' });
    await writeRecord<Rec>(path, { schema: 1, name: 'second' });
    expect((await readRecord(path, REC))?.name).toBe('second');
    expect(readdirSync(dir)).toEqual(['rec.json']);
  });

  it('a write that cannot be put in place fails naming the record, and leaves no temporary file', async () => {
    const path = join(dir, 'rec.json');
    // A directory holding a file where the record should be: the rename over it fails.
    await writeRecord<Rec>(join(path, 'inner.json'), { schema: 1, name: 'inner' });
    await expect(writeRecord<Rec>(path, { schema: 1, name: 'x' })).rejects.toThrow(/rec\.json/);
    expect(readdirSync(dir)).toEqual(['rec.json']);
    expect(readdirSync(path)).toEqual(['inner.json']);
  });

  it('answers undefined for a missing record, and for a path below a file', async () => {
    expect(await readRecord(join(dir, 'nope.json'), REC)).toBeUndefined();
    writeFileSync(join(dir, 'file'), 'x');
    expect(await readRecord(join(dir, 'file', 'rec.json'), REC)).toBeUndefined();
  });

  it('reports a corrupt record as Internal, naming the file', async () => {
    const path = join(dir, 'bad.json');
    writeFileSync(path, '{"schema": 1, "name": "trunc');
    await expectRejects(readRecord(path, REC), 'Internal', `state record ${path} is corrupt (not JSON)`);
  });

  it('refuses records without a schema version', async () => {
    for (const body of ['{"name":"x"}', '[]', 'null', '{"schema":"1"}']) {
      const path = join(dir, 'noschema.json');
      writeFileSync(path, body);
      await expectRejects(readRecord(path, REC), 'Internal', `state record ${path} has no schema version`);
    }
  });

  it('refuses a record written by a newer schema, and reads the current one', async () => {
    const path = join(dir, 'new.json');
    writeFileSync(path, JSON.stringify({ schema: SCHEMA_VERSION + 1, name: 'x' }));
    await expectRejects(readRecord(path, REC), 'Internal', `state record ${path} was written by a newer twinvol (schema ${SCHEMA_VERSION + 1})`);
    writeFileSync(path, JSON.stringify({ schema: SCHEMA_VERSION, name: 'x' }));
    expect(await readRecord(path, REC)).toEqual({ schema: SCHEMA_VERSION, name: 'x' });
  });

  it('refuses a record that does not fit its schema, naming the file and each field', async () => {
    const path = join(dir, 'odd.json');
    writeFileSync(path, JSON.stringify({ schema: SCHEMA_VERSION, name: 7 }));
    await expectRejects(readRecord(path, REC), 'Internal', `state record ${path} does not parse: name: expected string`);
    writeFileSync(path, JSON.stringify({ schema: SCHEMA_VERSION, name: 'x', owner: 'me', extra: 1 }));
    await expectRejects(readRecord(path, REC), 'Internal', `state record ${path} does not parse: the record: unknown keys owner, extra`);
  });

  it('names a missing field, a count out of range, every unknown key of a nested object, and at most five problems', async () => {
    const path = join(dir, 'worse.json');
    const mount = { schema: SCHEMA_VERSION, volumeId: 'v-1', path: '/p', kind: 'publish', readonly: false, createdAt: 'x' };
    const { readonly: _dropped, ...missing } = mount;
    writeFileSync(path, JSON.stringify({ ...missing, fsGroup: -1 }));
    await expectRejects(readRecord(path, RECORD_SCHEMAS.mount()), 'Internal', `does not parse: readonly: missing; fsGroup: below 0;`);
    const volume = { schema: SCHEMA_VERSION, id: 'v-1', backend: 'dir', capacityBytes: 1.5, fsType: '', access: 'single-node', parameters: {}, createdBy: 'csi', createdAt: 'x' };
    writeFileSync(path, JSON.stringify({ ...volume, attachments: [{ node: 'n', readonly: false, at: 'x', via: 'csi', a: 1, b: 2 }] }));
    await expectRejects(readRecord(path, RECORD_SCHEMAS.volume()), 'Internal', `does not parse: capacityBytes: not a whole number; attachments.0: unknown keys a, b;`);
    writeFileSync(path, JSON.stringify({ schema: SCHEMA_VERSION, a: 1, b: 2, c: 3, d: 4, e: 5, f: 6 }));
    // Six unknown keys, five named.
    await expectRejects(readRecord(path, RECORD_SCHEMAS.pv()), 'Internal', 'does not parse: pvName: missing; volumeId: missing; the record: unknown keys a, b, c, d, e; twinvol writes');
  });

  it('refuses an id a hand edit made into a path, in every record that holds one', async () => {
    const path = join(dir, 'edited.json');
    const edit = (fields: Record<string, unknown>) => writeFileSync(path, JSON.stringify({ schema: SCHEMA_VERSION, ...fields }));
    const refused = (why: string) => `state record ${path} does not parse: ${why}`;
    edit({ pvName: 'pv', volumeId: '../../etc' });
    await expectRejects(readRecord(path, RECORD_SCHEMAS.pv()), 'Internal', refused('volumeId: not a valid volume id'));
    edit({ nodeId: 'a/b', topology: {}, registeredBy: 'csi', registeredAt: 'x' });
    await expectRejects(readRecord(path, RECORD_SCHEMAS.node()), 'Internal', refused('nodeId: not a valid node name'));
    edit({ id: '/abs', sourceVolumeId: 'v', backend: 'dir', fsType: '', sizeBytes: 0, createdAt: 'x' });
    await expectRejects(readRecord(path, RECORD_SCHEMAS.snapshot()), 'Internal', refused('id: not a valid snapshot id'));
    writeFileSync(path, JSON.stringify({ schema: SCHEMA_VERSION, pvName: 'pv', volumeId: 'v-1' }));
    expect(await readRecord(path, RECORD_SCHEMAS.pv())).toEqual({ schema: SCHEMA_VERSION, pvName: 'pv', volumeId: 'v-1' });
  });

  it('passes on read errors other than a missing file', async () => {
    const path = join(dir, 'dir.json');
    // A directory where a record should be: EISDIR is not "missing".
    await import('node:fs/promises').then((fs) => fs.mkdir(path));
    await expect(readRecord(path, REC)).rejects.toMatchObject({ code: 'EISDIR' });
  });

  it('removeRecord is idempotent', async () => {
    const path = join(dir, 'rec.json');
    await writeRecord<Rec>(path, { schema: 1, name: 'x' });
    await removeRecord(path);
    await removeRecord(path);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('never exposes partial content: concurrent writers of large distinct records, read while they write', async () => {
    const path = join(dir, 'hot.json');
    const records: Rec[] = Array.from({ length: 16 }, (_, i) => ({
      schema: SCHEMA_VERSION,
      name: `writer-${i}`,
      // ~256 KiB each, distinct content: a torn or interleaved file cannot parse as any one of them.
      payload: String.fromCharCode(65 + i).repeat(256 * 1024),
    }));
    const byName = new Map(records.map((r) => [r.name, r]));
    await writeRecord(path, records[0]!);

    // Several readers keep reading while every writer rewrites its record a few times. A plain
    // (truncate-and-write) writer fails this test on nearly every read; an atomic one never does.
    let writing = true;
    let reads = 0;
    const torn: string[] = [];
    const readers = Array.from({ length: 4 }, async () => {
      while (writing) {
        const text = await readFile(path, 'utf8');
        reads++;
        try {
          const parsed = JSON.parse(text) as Rec;
          if (JSON.stringify(parsed) !== JSON.stringify(byName.get(parsed.name))) torn.push(`mixed content named ${parsed.name}`);
        } catch {
          torn.push(`${text.length} chars that do not parse`);
        }
      }
    });
    await Promise.all(
      records.map(async (r) => {
        for (let round = 0; round < 3; round++) await writeRecord(path, r);
      }),
    );
    writing = false;
    await Promise.all(readers);

    expect(torn).toEqual([]);
    expect(reads).toBeGreaterThan(0);
    const final = JSON.parse(readFileSync(path, 'utf8')) as Rec;
    expect(final).toEqual(byName.get(final.name));
    expect(readdirSync(dir)).toEqual(['hot.json']);
  });
});
