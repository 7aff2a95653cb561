// The SSE fan-out's bounds: a client whose socket is busy keeps at most `queueSize` events, the oldest dropped
// and counted (told to the client before its next event), a heartbeat on the clock, and a cap on clients.
import { EventEmitter } from "node:events";
import type { ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { SseHub } from "./sse-hub.js";

/** A response whose socket accepts writes only while `open`; `drain` fires when reopened. */
class FakeResponse extends EventEmitter {
  written: string[] = [];
  open = true;
  ended = false;
  writeHead(): this {
    return this;
  }
  write(s: string): boolean {
    this.written.push(s);
    return this.open;
  }
  end(): void {
    this.ended = true;
  }
  reopen(): void {
    this.open = true;
    this.emit("drain");
  }
}

const events = (r: FakeResponse): string[] => r.written.join("").split("\n\n").filter((f) => f.startsWith("event:")).map((f) => `${/^event: (.*)$/m.exec(f)?.[1]} ${/^data: (.*)$/m.exec(f)?.[1]}`);

describe("SseHub", () => {
  it("drops the oldest events of a stalled client, counts them, and says so before the next event", () => {
    const hub = new SseHub({ clock: new VirtualClock(), queueSize: 3, heartbeatMs: 1000 });
    const fast = new FakeResponse();
    const slow = new FakeResponse();
    hub.attach(fast as unknown as ServerResponse);
    hub.attach(slow as unknown as ServerResponse);
    slow.open = false;
    hub.publish("n", 0); // written, but the socket is now full: later events queue
    for (let i = 1; i <= 10; i++) hub.publish("n", i);
    expect(hub.droppedCounts()).toEqual([0, 7]);
    expect(events(fast)).toHaveLength(11);
    slow.reopen();
    expect(events(slow)).toEqual(["n 0", 'dropped {"dropped":7}', "n 8", "n 9", "n 10"]);
    hub.publish("n", 11);
    expect(events(slow).slice(-1)).toEqual(["n 11"]);
    hub.close();
    expect(slow.ended && fast.ended).toBe(true);
  });

  it("writes a heartbeat comment every heartbeatMs and refuses clients beyond maxClients", () => {
    const clock = new VirtualClock();
    const hub = new SseHub({ clock, heartbeatMs: 1000, maxClients: 1 });
    const a = new FakeResponse();
    expect(hub.attach(a as unknown as ServerResponse, { event: "hello", data: 1 })).toBe(true);
    expect(hub.attach(new FakeResponse() as unknown as ServerResponse)).toBe(false);
    clock.advance(2500);
    expect(a.written.filter((w) => w === ": heartbeat\n\n")).toHaveLength(2);
    expect(events(a)).toEqual(["hello 1"]);
    a.emit("close");
    expect(hub.size).toBe(0);
    hub.close();
  });

  it("refuses a queue size below 1", () => {
    expect(() => new SseHub({ clock: new VirtualClock(), queueSize: 0 })).toThrow(/queueSize must be an integer >= 1, got 0/);
  });
});
