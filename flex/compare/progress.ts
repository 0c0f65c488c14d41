/**
 * A one-line progress bar on stderr, drawn only on a terminal. Twenty lines of our own rather than
 * cli-progress (3.12.0, last released 2023, with string-width as a dependency): one bar, redrawn with \r.
 */
export interface Progress {
  tick(label: string): void;
  done(): void;
}

export function progressBar(total: number, out: NodeJS.WriteStream = process.stderr): Progress {
  if (!out.isTTY || total <= 0) return { tick: () => undefined, done: () => undefined };
  let n = 0;
  const width = 30;
  const draw = (label: string) => {
    const filled = Math.round((n / total) * width);
    const line = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${n}/${total} ${label}`;
    out.write(`\r${line.slice(0, Math.max(20, (out.columns ?? 80) - 1)).padEnd(Math.min(line.length + 10, (out.columns ?? 80) - 1))}`);
  };
  draw('starting');
  return {
    tick(label) {
      n = Math.min(total, n + 1);
      draw(label);
    },
    done: () => out.write(`\r${' '.repeat(Math.max(0, (out.columns ?? 80) - 1))}\r`),
  };
}
