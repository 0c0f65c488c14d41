/**
 * The latest records of one kind this process made, at most `limit`, plus everyone listening for
 * the next. A FlexVolume call makes a handful and logs them all (flex/dispatch.ts); a CSI server runs
 * for months and makes them on every stage, so only the latest are kept: observers see every one.
 * Used for the tools the runner spawns (shared/runner.ts) and the mounts made as system calls
 * (shared/native-mount.ts).
 */
export class RecordLog<T> {
  private readonly kept: T[] = [];
  private readonly observers = new Set<(record: T) => void>();

  constructor(private readonly limit: number) {}

  /** Keeps one finished record and tells every observer, in the order they started listening. */
  add(record: T): void {
    this.kept.push(record);
    if (this.kept.length > this.limit) this.kept.splice(0, this.kept.length - this.limit);
    for (const observer of this.observers) observer(record);
  }

  /** The latest records, oldest first. */
  latest(): readonly T[] {
    return this.kept;
  }

  /** Listens for every record from now on; the function returned stops it. */
  observe(observer: (record: T) => void): () => void {
    this.observers.add(observer);
    return () => this.observers.delete(observer);
  }
}
