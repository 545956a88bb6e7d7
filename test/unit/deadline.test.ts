import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Deadline } from '../../src/custody/deadline.ts';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('a deadline', () => {
  it('aborts as AbortSignal.timeout does once its time has passed', () => {
    const deadline = new Deadline(1_000);
    vi.advanceTimersByTime(999);
    expect(deadline.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(deadline.signal.aborted).toBe(true);
    expect(deadline.signal.reason).toBeInstanceOf(DOMException);
    expect((deadline.signal.reason as DOMException).name).toBe('TimeoutError');
  });

  it('never fires once cleared: no timer is left behind the work it bounded', () => {
    const deadline = new Deadline(1_000);
    deadline.clear();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(5_000);
    expect(deadline.signal.aborted).toBe(false);
  });

  it("aborts with the outer signal's reason when that comes first, and stops following it once cleared", () => {
    const outer = new AbortController();
    const deadline = new Deadline(1_000, outer.signal);
    const reason = new DOMException('overall deadline', 'TimeoutError');
    outer.abort(reason);
    expect(deadline.signal.reason).toBe(reason);

    const later = new AbortController();
    const cleared = new Deadline(1_000, later.signal);
    cleared.clear();
    later.abort(new Error('after the request ended'));
    expect(cleared.signal.aborted).toBe(false);

    const already = new AbortController();
    already.abort(reason);
    expect(new Deadline(1_000, already.signal).signal.reason).toBe(reason);
  });
});
