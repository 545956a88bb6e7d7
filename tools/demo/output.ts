/**
 * Everything the demo prints. Text for people by default: the set-up, one line per event, a progress
 * bar (redrawn in place on a terminal, plain lines otherwise) and a summary table. With `--json`, stdout
 * carries one JSON document per line (`start`, `event`, `summary`) and the text for people goes to stderr.
 *
 * Only an event's brief phrase is printed (events/format.ts: txid, code, issue paths), never its data as
 * a whole, so no record, token or person (`raw.user`, travel-rule `dataJson`) can reach the output.
 */
import type { Writable } from 'node:stream';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import { eventPhrase } from '../../src/events/format.ts';
import { SAMPLE_LABELS, type SampleKind } from './samples.ts';
import type { ApprovalInfo } from './run.ts';
import type { Verdict } from './verify.ts';

type Stream = Writable & { isTTY?: boolean };

export interface StartInfo {
  runId: string;
  redis: string;
  simulator: string;
  prefix: string;
  eventsStream: string;
  dashboardUrl: string;
  /** Only when the demo made them up (HTTP_HOST not loopback and none given): printed this once. */
  generatedCredentials: { user: string; password: string } | undefined;
  /** Credentials the person configured: the user is named, the password never printed. */
  configuredUser: string | undefined;
  /** Per kind, in the samples' order (only the kinds the run has). */
  samples: Partial<Record<SampleKind, number>>;
  jobs: number;
  /** Set with --provider bitgo only (undefined leaves the first provider's output as it was). */
  bitgo?: { approvalAfterMs: number; txidAfterMs: number } | undefined;
}

export interface SummaryInfo {
  runId: string;
  prefix: string;
  eventsStream: string;
  dashboardUrl: string;
  verdict: Verdict;
  jobs: number;
  events: number;
  durationMs: number;
  /** Set when the run gave up waiting. */
  timedOut: boolean;
  /** --keep: the dashboard stays up after the summary. */
  keep: boolean;
  /** BitGo only: each accepted transfer's wait in pendingApproval, by sequenceId. */
  approvals?: Record<string, ApprovalInfo> | undefined;
}

const COLORS = { red: 31, green: 32, yellow: 33, cyan: 36, dim: 2, bold: 1 } as const;
const BAR_WIDTH = 24;

export class DemoOutput {
  readonly json: boolean;
  readonly #stdout: Stream;
  readonly #stderr: Stream;
  readonly #color: boolean;
  /** Progress bar drawn in place on stderr (a terminal); plain progress lines otherwise. */
  readonly #liveBar: boolean;
  #bar = '';
  #lastProgress = '';

  constructor(options: { json: boolean; stdout: Stream; stderr: Stream; color: boolean }) {
    this.json = options.json;
    this.#stdout = options.stdout;
    this.#stderr = options.stderr;
    this.#color = options.color;
    this.#liveBar = options.stderr.isTTY === true;
  }

  /** Text for people: stdout, or stderr in JSON mode. */
  info(text: string): void {
    this.#write(this.json ? this.#stderr : this.#stdout, text);
  }

  /** Always stderr: shutdown steps, warnings, errors. */
  notice(text: string): void {
    this.#write(this.#stderr, text);
  }

  start(info: StartInfo): void {
    if (this.json) this.#record({ type: 'start', ...info });
    const counts = Object.entries(info.samples)
      .filter(([, count]) => count > 0)
      .map(([kind, count]) => `${count} ${SAMPLE_LABELS[kind as SampleKind]}`)
      .join(', ');
    const transfers = Object.values(info.samples).reduce((sum, count) => sum + count, 0);
    const dashboard = info.generatedCredentials
      ? `${info.dashboardUrl}  (user ${info.generatedCredentials.user}, password ${info.generatedCredentials.password}: shown once)`
      : info.configuredUser
        ? `${info.dashboardUrl}  (user ${info.configuredUser}, password from DASHBOARD_PASSWORD)`
        : info.dashboardUrl;
    this.info(
      [
        this.#paint('bold', `custody transfer worker demo (${info.runId})`),
        `  redis       ${info.redis}`,
        info.bitgo
          ? `  simulator   ${info.simulator}  (BitGo: a send waits ${info.bitgo.approvalAfterMs} ms in pendingApproval, its txid ${info.bitgo.txidAfterMs} ms after signing; no travel-rule gate)`
          : `  simulator   ${info.simulator}  (travel rule applies: outgoingTxn 1, mandatory)`,
        `  worker      queue prefix ${info.prefix}, events on ${info.eventsStream}`,
        `  dashboard   ${dashboard}`,
        `enqueueing ${info.jobs} jobs for ${transfers} transfers: ${counts}`,
        '',
        this.#paint('bold', 'events (UTC)'),
      ].join('\n'),
    );
  }

  event(event: TransferEvent): void {
    if (this.json) {
      this.#record({
        type: 'event',
        id: event.id,
        at: event.at,
        event: event.event,
        sequenceId: event.sequenceId,
        version: event.version,
        detail: eventPhrase(event, { brief: true }),
      });
      return;
    }
    const time = event.at.slice(11, 23);
    const who = event.event === 'reconcile.completed' ? ''.padEnd(34) : `${event.sequenceId.padEnd(30)} v${event.version}`.padEnd(34);
    this.info(`  ${time}  ${this.#paint(eventColor(event.event), event.event.padEnd(19))}  ${who}  ${eventPhrase(event, { brief: true })}`);
  }

  /** BitGo: a submitted transfer the simulator still holds in pendingApproval (accepted, unsigned, no txid). */
  approval(sequenceId: string, at = new Date()): void {
    if (this.json) {
      this.#record({ type: 'approval', at: at.toISOString(), sequenceId, state: 'pendingApproval' });
      return;
    }
    const time = at.toISOString().slice(11, 23);
    this.info(
      `  ${time}  ${this.#paint('yellow', 'pendingApproval'.padEnd(19))}  ${sequenceId.padEnd(34)}  accepted, waiting for approval at BitGo: no txid yet`,
    );
  }

  progress(settled: number, total: number, elapsedMs: number): void {
    const text = `${settled}/${total} transfers settled`;
    if (!this.#liveBar) {
      if (text !== this.#lastProgress) this.#stderr.write(`progress: ${text} (${seconds(elapsedMs)})\n`);
      this.#lastProgress = text;
      return;
    }
    const filled = total === 0 ? BAR_WIDTH : Math.round((settled / total) * BAR_WIDTH);
    this.#bar = `[${'█'.repeat(filled)}${'░'.repeat(BAR_WIDTH - filled)}] ${text}  ${seconds(elapsedMs)}`;
    this.#stderr.write(`\r\x1b[2K${this.#bar}`);
  }

  /** The bar's last state stays on screen as a line of its own. */
  endProgress(): void {
    if (this.#liveBar && this.#bar) this.#stderr.write(`\r\x1b[2K${this.#bar}\n`);
    this.#bar = '';
  }

  summary(summary: SummaryInfo): void {
    const { verdict } = summary;
    if (this.json) {
      this.#record({
        type: 'summary',
        ok: verdict.ok,
        runId: summary.runId,
        prefix: summary.prefix,
        eventsStream: summary.eventsStream,
        dashboardUrl: summary.dashboardUrl,
        durationMs: summary.durationMs,
        timedOut: summary.timedOut,
        jobs: summary.jobs,
        events: summary.events,
        samples: verdict.samples.map((result) => ({
          sequenceId: result.sample.sequenceId,
          kind: result.sample.kind,
          jobs: result.sample.jobs.length,
          expected: result.sample.expected,
          got: result.terminal.length === 1 ? result.terminal[0] : result.terminal.length === 0 ? null : result.terminal,
          submitted: result.submitted,
          acceptedSends: result.accepted,
          ok: result.ok,
          problems: result.problems,
          approval: summary.approvals?.[result.sample.sequenceId],
        })),
        problems: verdict.problems,
      });
    }
    const header = ['sequenceId', 'sample', 'jobs', 'expected', 'got', 'submitted', 'sends', 'ok'];
    const rows = verdict.samples.map((result) => [
      result.sample.sequenceId,
      SAMPLE_LABELS[result.sample.kind],
      String(result.sample.jobs.length),
      result.sample.expected,
      result.terminal.length === 0 ? '(none)' : result.terminal.join('+'),
      String(result.submitted),
      String(result.accepted),
      result.ok ? 'yes' : 'NO',
    ]);
    const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
    const line = (cells: string[], paint?: (cell: string, column: number) => string) =>
      `  ${cells.map((cell, column) => (paint ? paint(cell.padEnd(widths[column]!), column) : cell.padEnd(widths[column]!))).join('  ')}`.trimEnd();
    const transfers = verdict.samples.length;
    const failed = verdict.samples.filter((result) => !result.ok).length;
    const stats = `${summary.jobs} jobs, ${summary.events} events, ${seconds(summary.durationMs)}`;
    const lines = [
      '',
      this.#paint('bold', 'summary'),
      this.#paint('dim', line(header)),
      ...rows.map((row) => line(row, (cell, column) => (column === 7 ? this.#paint(cell.trim() === 'yes' ? 'green' : 'red', cell) : cell))),
      '',
      verdict.ok
        ? this.#paint('green', `ok: all ${transfers} transfers reached their expected outcome (${stats})`)
        : this.#paint(
            'red',
            `FAILED: ${failed} of ${transfers} transfers did not reach their expected outcome${summary.timedOut ? ' before DEMO_TIMEOUT' : ''} (${stats})`,
          ),
      ...verdict.problems.map((problem) => `  ${problem}`),
      ...(summary.approvals ? [approvalLine(summary.approvals)] : []),
      // The URL only while it answers: without --keep everything stops right after this summary.
      summary.keep ? `dashboard: ${summary.dashboardUrl}` : `the dashboard stops with the demo; \`npm run demo -- --keep\` keeps it up`,
    ];
    this.info(lines.join('\n'));
  }

  error(message: string): void {
    if (this.json) this.#record({ type: 'error', message });
    this.#write(this.#stderr, this.#paint('red', `demo: ${message}`));
  }

  #record(value: Record<string, unknown>): void {
    this.#write(this.#stdout, JSON.stringify(value));
  }

  /** Writes a line; a live bar is taken off first and drawn again after, so lines never run into it. */
  #write(stream: Stream, text: string): void {
    if (this.#bar) this.#stderr.write('\r\x1b[2K');
    stream.write(`${text}\n`);
    if (this.#bar) this.#stderr.write(this.#bar);
  }

  #paint(color: keyof typeof COLORS, text: string): string {
    return this.#color ? `\x1b[${COLORS[color]}m${text}\x1b[0m` : text;
  }
}

/** e.g. "pendingApproval: 6 of 6 sent transfers waited for approval at BitGo (900 ms), 6 seen waiting at transfer.submitted". */
function approvalLine(approvals: Record<string, ApprovalInfo>): string {
  const all = Object.values(approvals);
  const waited = all.filter((approval) => approval.waitedMs > 0);
  const seen = all.filter((approval) => approval.seenWaiting).length;
  const times = waited.map((approval) => approval.waitedMs);
  const span =
    times.length === 0
      ? ''
      : Math.min(...times) === Math.max(...times)
        ? ` (${times[0]} ms)`
        : ` (${Math.min(...times)}–${Math.max(...times)} ms)`;
  return `pendingApproval: ${waited.length} of ${all.length} sent transfers waited for approval at BitGo${span}, ${seen} seen waiting at their transfer.submitted`;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

function eventColor(event: string): keyof typeof COLORS {
  if (event === 'transfer.broadcast') return 'green';
  if (event === 'transfer.submitted') return 'cyan';
  if (event === 'transfer.blocked' || event === 'transfer.expired') return 'yellow';
  if (event === 'reconcile.completed') return 'dim';
  return 'red';
}
