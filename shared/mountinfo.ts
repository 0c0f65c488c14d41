import { readFileSync } from 'node:fs';

/** One line of /proc/self/mountinfo, the kernel's own account of what is mounted where. */
export interface MountEntry {
  id: number;
  parentId: number;
  /** "major:minor" of the mounted filesystem. */
  device: string;
  /** Path inside the source filesystem that is mounted here (not "/" for bind mounts of a subtree). */
  root: string;
  mountPoint: string;
  mountOptions: string[];
  fsType: string;
  source: string;
  superOptions: string[];
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
function unescape(field: string): string {
  // Nearly every field has no escape: the regular expression is skipped (a busy CSI server reads
  // the table several times per call).
  if (!field.includes('\\')) return field;
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    const fields = line.split(' ');
    const sep = fields.indexOf('-', 6);
    if (sep < 0 || fields.length < sep + 3) continue;
    entries.push({
      id: Number(fields[0]),
      parentId: Number(fields[1]),
      device: fields[2] ?? '',
      root: unescape(fields[3] ?? ''),
      mountPoint: unescape(fields[4] ?? ''),
      mountOptions: (fields[5] ?? '').split(','),
      fsType: fields[sep + 1] ?? '',
      source: unescape(fields[sep + 2] ?? ''),
      superOptions: (fields[sep + 3] ?? '').split(','),
    });
  }
  return entries;
}

export function readMounts(): MountEntry[] {
  return parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'));
}

/** The mount visible at `path` (the last one stacked there), if any. */
export function mountAt(path: string, mounts: readonly MountEntry[] = readMounts()): MountEntry | undefined {
  for (let i = mounts.length - 1; i >= 0; i--) if (mounts[i]?.mountPoint === path) return mounts[i];
  return undefined;
}

export function isReadOnly(entry: MountEntry): boolean {
  return entry.mountOptions.includes('ro');
}
