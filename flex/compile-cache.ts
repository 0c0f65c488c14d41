import { closeSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Script } from 'node:vm';

/** A temporary file this old was left by a killed call: a live one writes its files in milliseconds. */
const ABANDONED_MS = 60_000;

/**
 * V8's code cache for the packed modules (flex/packed-modules.ts), kept under the state dir. Every
 * kubelet call is a new process, and without it each one inflated the dispatcher and compiled it from
 * scratch: about a fifth of Node's whole start-up (scripts/bench/flex.mjs). A call that finds no
 * cache for its verb, or one V8 refuses (another Node, other flags), runs as before and leaves its
 * verb's at exit, made after its work so that it also holds the functions the call compiled on the
 * way: the dispatcher's source once, and V8's data for each verb (at most a dozen, about 100-250 KB
 * each, on the state dir's tmpfs). What is kept
 * is derived from the executable alone and keyed by its path and that file's identity, so an upgrade
 * (a new inode from the installer's rename, or a new size or mtime) starts afresh and clears the
 * entries of the build it replaced. The state dir is root's (0700), like every record that decides
 * what gets mounted: whoever can write there can already mount anything.
 */
export class CompileCache {
  private readonly pending = new Map<string, { source: string | undefined; script: Script }>();

  private constructor(
    private readonly dir: string,
    /**
     * Which verb: each keeps V8 data of its own beside the one source. The data holds what the
     * call that made it compiled, and a cache made by getvolumename made a later dir mount 6 ms
     * slower than one made by a mount, while a mount's made getvolumename 1.5 ms slower than its own
     * (30 rounds of each, /tmp/fm/cachetest.mjs, scratch): the first verb after an install no longer
     * decides for all.
     */
    private readonly variant: string,
    /** Which executable: entries of another one (the bundle beside a single executable) are left alone. */
    private readonly owner: string,
    /** Which build of it: entries of an earlier build are removed when this one writes. */
    private readonly key: string,
  ) {}

  /** The cache for the running executable under `dir`, or none when its identity cannot be read. */
  static open(dir: string, variant: string): CompileCache | undefined {
    try {
      // The script, or in a single executable the executable itself (its __filename).
      const path = __filename;
      const st = statSync(path);
      const owner = pathTag(path);
      return new CompileCache(dir, variant, owner, `${owner}-${process.version}-${st.ino}-${st.size}-${Math.trunc(st.mtimeMs)}`);
    } catch {
      return undefined;
    }
  }

  private sourcePath(name: string): string {
    return join(this.dir, `${this.key}.${name}.js`);
  }

  private dataPath(name: string): string {
    return join(this.dir, `${this.key}.${name}.${this.variant}.v8`);
  }

  /**
   * The module's source as a call left it, and this verb's V8 data if a call of it left some. Data
   * alone vouches for a source: V8 refuses data made from a source of another length, or by another
   * V8 or other flags, and flex/packed-modules.ts then compiles the executable's own copy, as it does
   * for a verb without data. Each file is only ever replaced whole by the executable it is keyed to.
   */
  read(name: string): { source: string; data?: Buffer } | undefined {
    const source = readIf(this.sourcePath(name))?.toString('utf8');
    const data = source === undefined ? undefined : readIf(this.dataPath(name));
    return source === undefined ? undefined : { source, ...(data ? { data } : {}) };
  }

  /**
   * Writes this verb's V8 data for the module when this process exits, and the source it was made
   * from unless that is already there (`source` undefined): never before the reply, never failing it.
   */
  saveAtExit(name: string, script: Script, source: string | undefined): void {
    if (this.pending.size === 0) process.once('exit', () => this.flush());
    this.pending.set(name, { source, script });
  }

  private flush(): void {
    try {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      for (const name of readdirSync(this.dir)) {
        if (!name.startsWith(`${this.owner}-`)) continue;
        // An earlier build's entries go; so does a temporary file a killed call left (kubelet kills
        // a call past its deadline), once it is older than any call that could still be writing it.
        const age = () => Date.now() - (statSync(join(this.dir, name), { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
        const stale = !name.startsWith(`${this.key}.`) || (name.endsWith('.tmp') && age() > ABANDONED_MS);
        if (stale) rmSync(join(this.dir, name), { force: true });
      }
      for (const [name, { source, script }] of this.pending) {
        // Source first: a data file is only ever used with the source it was made from beside it.
        if (source !== undefined) replace(this.sourcePath(name), Buffer.from(source, 'utf8'));
        replace(this.dataPath(name), script.createCachedData());
      }
    } catch {
      // A full or read-only state dir costs the next call its speed, not its answer.
    }
  }
}

/** A short, stable name for an executable's path (FNV-1a): node:crypto costs a tenth of Node's start-up. */
function pathTag(path: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < path.length; i++) h = Math.imul(h ^ path.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16);
}

function readIf(path: string): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return undefined;
  }
  try {
    // Only a regular file: a FIFO or a device planted under the name would hang or flood the call.
    return fstatSync(fd).isFile() ? readFileSync(fd) : undefined;
  } finally {
    closeSync(fd);
  }
}

/** Atomic, for the 32 calls kubelet may start at once: each reader sees a whole old or new file. */
function replace(path: string, bytes: Uint8Array): void {
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, bytes, { mode: 0o600 });
  renameSync(temporary, path);
}
