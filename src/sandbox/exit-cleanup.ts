// Last-resort cleanup when the Node process exits: kills sandbox processes and removes workspaces
// synchronously (an "exit" listener cannot await). One listener serves every provider.

/** Something that can tear itself down synchronously. */
export interface SyncDisposable {
  disposeSync(): void;
}

const live = new Set<SyncDisposable>();
let installed = false;

function runAll(): void {
  for (const d of [...live]) {
    try {
      d.disposeSync();
    } catch {
      // keep cleaning the others; the process is exiting anyway
    }
  }
  live.clear();
}

/** Register `d` for cleanup on process exit (installs the listener on first use). */
export function registerExitCleanup(d: SyncDisposable): void {
  if (!installed) {
    process.on("exit", runAll);
    installed = true;
  }
  live.add(d);
}

/** Forget `d` (it cleaned itself up). */
export function unregisterExitCleanup(d: SyncDisposable): void {
  live.delete(d);
}

/** Number of registered disposables (for tests). */
export function pendingExitCleanups(): number {
  return live.size;
}
