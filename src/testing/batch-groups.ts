// Test support: what an exported batch file (`batch-it{k}.jsonl`, `batch-step{k}.jsonl`) trained on, per group.
import { readFileSync } from "node:fs";

/** Group id → task id of every sample of an exported JSONL batch. */
export function batchGroups(path: string): Map<string, string> {
  const groups = new Map<string, string>();
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (line === "") continue;
    const s = JSON.parse(line) as { groupId: string; taskId: string };
    groups.set(s.groupId, s.taskId);
  }
  return groups;
}
