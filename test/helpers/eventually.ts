/** Waits (bounded) for `cond`: the kernel tears processes and mounts down asynchronously. False once the deadline passed. */
export async function eventually(cond: () => boolean, deadlineMs = 10_000): Promise<boolean> {
  const end = Date.now() + deadlineMs;
  while (!cond()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
}
