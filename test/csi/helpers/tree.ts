import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/** Every path below `root` (relative), sorted: compared before and after a call that must write nothing. */
export function treeOf(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string, rel: string) => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const n of names.sort()) {
      out.push(join(rel, n));
      if (lstatSync(join(dir, n)).isDirectory()) walk(join(dir, n), join(rel, n));
    }
  };
  walk(root, '');
  return out;
}
