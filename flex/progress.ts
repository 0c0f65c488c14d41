/**
 * What a long CLI operation is doing, for a person at a terminal: one line on stderr, rewritten in
 * place with the step and the seconds it has taken so far, erased when the operation ends. Off when
 * stderr is not a terminal (scripts, kubelet), so no output of any other caller changes.
 * shared/backends/*.ts say their steps through BackendContext.progress (shared/backends/backend.ts).
 */
export interface Progress {
  /** The step now running; undefined when stderr is not a terminal. */
  step: ((text: string) => void) | undefined;
  /** Erases the line (call whatever the outcome). */
  done(): void;
}

const TICK_MS = 250;

export function terminalProgress(out: NodeJS.WriteStream = process.stderr): Progress {
  if (!out.isTTY) return { step: undefined, done: () => undefined };
  let text = '';
  let since = 0;
  let shown = false;
  const draw = () => {
    const seconds = ((Date.now() - since) / 1000).toFixed(1);
    const line = `${text} ... ${seconds}s`;
    // A terminal that reports no width (under `script`) still gets the whole line.
    const width = out.columns && out.columns > 10 ? out.columns - 1 : line.length;
    out.write(`\r\x1b[2K${line.slice(0, width)}`);
    shown = true;
  };
  let timer: NodeJS.Timeout | undefined;
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
      if (shown) out.write('\r\x1b[2K');
      shown = false;
    },
  };
}
