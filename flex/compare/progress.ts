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
  // A terminal that reports no width (0, as under script(1)) gets 80 columns.
  const columns = () => (out.columns || 80) - 1;
  const draw = (label: string) => {
    const filled = Math.round((n / total) * width);
    const line = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${n}/${total} ${label}`.slice(0, columns());
    // Padded over what a longer previous label left on the line.
    out.write(`\r${line.padEnd(columns())}`);
  };
  draw('starting');
  return {
    tick(label) {
      n = Math.min(total, n + 1);
      draw(label);
    },
    done: () => out.write(`\r${' '.repeat(columns())}\r`),
  };
}
