import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync } from 'node:fs';
import { walkCalls } from '../fs-async.js';
import { join } from 'node:path';
import { errnoCode } from '../errors.js';

/** What a catalog entry is, by the directory that holds its kind (shared/store/catalog.ts). */
const ENTITIES = ['volumes', 'snapshots'] as const;
export type Entity = (typeof ENTITIES)[number];

/** An entry being built (`new`) or torn down (`trash`). */
const PURPOSES = ['new', 'trash'] as const;
type Purpose = (typeof PURPOSES)[number];

export interface WorkEntry {
  name: string;
  purpose: Purpose;
  entity: Entity;
  id: string;
}

// `@` cannot occur in an id (shared/validate.ts), so a name splits back into its parts unambiguously.
const NAME = /^(new|trash)@(volumes|snapshots)@([A-Za-z0-9][A-Za-z0-9._-]*)@[0-9a-f]{8}$/;

/**
 * The data root's `.work/` directory: every entry is built or torn down here, under a name that says
 * which entry it belongs to, so that work a crashed process left behind can be found and removed by
 * whoever next holds that entry's lock (the lock is held for the whole of a create or delete, so a
 * holder knows nobody else is using the entry's work).
 */
export class WorkArea {
  constructor(readonly dir: string) {}

  // The small steps are synchronous, as the store's record calls are (shared/store/json-record.ts);
  // removing an entry's data, which may be a whole volume's files, stays asynchronous.
  async make(purpose: Purpose, entity: Entity, id: string): Promise<string> {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    return join(this.dir, `${purpose}@${entity}@${id}@${randomBytes(4).toString('hex')}`);
  }

  /** Every entry, parsed; names this version did not make are `foreign` and left alone. */
  async list(): Promise<{ entries: WorkEntry[]; foreign: string[] }> {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return { entries: [], foreign: [] };
      throw err;
    }
    const entries: WorkEntry[] = [];
    const foreign: string[] = [];
    for (const name of names.sort()) {
      const m = NAME.exec(name);
      const purpose = PURPOSES.find((p) => p === m?.[1]);
      const entity = ENTITIES.find((e) => e === m?.[2]);
      if (m?.[3] && purpose && entity) entries.push({ name, purpose, entity, id: m[3] });
      else foreign.push(name);
    }
    return { entries, foreign };
  }

  async remove(entries: readonly WorkEntry[]): Promise<void> {
    for (const e of entries) await walkCalls.rmTree(join(this.dir, e.name));
  }
}
