/**
 * Progress for a person at a terminal: one line on stderr, rewritten in place and erased when the work
 * ends. Off when stderr is not a terminal (scripts, kubelet), so no other caller's output changes.
 * No library: cli-progress (3.12.0, last released 2023) brings string-width along for one line of ours.
 */
interface TerminalLine {
  draw(text: string): void;
  clear(): void;
}

function terminalLine(out: NodeJS.WriteStream): TerminalLine | undefined {
  if (!out.isTTY) return undefined;
  // A terminal that reports no width (0, as under script(1)) gets 80 columns.
  const columns = () => (out.columns || 80) - 1;
  let shown = false;
  return {
    draw(text) {
      out.write(`\r\x1b[2K${text.slice(0, columns())}`);
      shown = true;
    },
    clear() {
      if (shown) out.write('\r\x1b[2K');
      shown = false;
    },
  };
}

/** The step of a long operation now running, with its seconds so far (`volume create`: image, mkfs). */
export interface StepProgress {
  /** Undefined when stderr is not a terminal: a caller hands it on as an optional hook. */
  step: ((text: string) => void) | undefined;
  /** Erases the line (call whatever the outcome). */
  done(): void;
}

const TICK_MS = 250;

export function stepProgress(out: NodeJS.WriteStream = process.stderr): StepProgress {
  const line = terminalLine(out);
  if (!line) return { step: undefined, done: () => undefined };
  let text = '';
  let since = 0;
  let timer: NodeJS.Timeout | undefined;
  const draw = () => line.draw(`${text} ... ${((Date.now() - since) / 1000).toFixed(1)}s`);
  return {
    step(next) {
      text = next;
      since = Date.now();
      draw();
      // Unref'd: a finished operation never waits for the next tick.
      timer ??= setInterval(draw, TICK_MS).unref();
    },
    done() {
      if (timer) clearInterval(timer);
      timer = undefined;
      line.clear();
    },
  };
}

/** A bar over a known number of steps (`twinvol compare`'s rounds). */
export interface BarProgress {
  tick(label: string): void;
  done(): void;
}

export function progressBar(total: number, out: NodeJS.WriteStream = process.stderr): BarProgress {
  const line = total > 0 ? terminalLine(out) : undefined;
  if (!line) return { tick: () => undefined, done: () => undefined };
  let n = 0;
  const width = 30;
  const draw = (label: string) => {
    const filled = Math.round((n / total) * width);
    line.draw(`[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${n}/${total} ${label}`);
  };
  draw('starting');
  return {
    tick(label) {
      n = Math.min(total, n + 1);
      draw(label);
    },
    done: () => line.clear(),
  };
}
