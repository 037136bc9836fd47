import { connect, createServer, type Server, type Socket } from 'node:net';
import { seededRandom } from './seeded-random.ts';

/** What the proxy does to one request, chosen when its first bytes arrive. */
export type Fault = 'none' | 'reset' | 'drop' | 'delay';

/** Probabilities of each fault per request; the rest pass through untouched. */
export interface FaultRates {
  /** Reset the client connection before forwarding anything: the server never sees the request. */
  reset?: number;
  /** Forward the request, then destroy the client connection as soon as the server starts answering. */
  drop?: number;
  /** Forward the request, then hold the answer for `delayMs` (past the client's attempt timeout). */
  delay?: number;
  /** How long a delayed answer is held. Default 2 000. */
  delayMs?: number;
}

export interface FaultProxyOptions {
  /** Ports on 127.0.0.1 the proxy forwards to, round-robin per request. */
  upstreams: number[];
  /** Seed of the fault schedule. Default 1. */
  seed?: number;
  /** Initial fault rates. Default: none. */
  faults?: FaultRates;
}

export interface FaultProxyStats {
  connections: number;
  requests: number;
  passed: number;
  resets: number;
  drops: number;
  delays: number;
  /** Requests forwarded to each upstream, in `upstreams` order. */
  perUpstream: number[];
  /** Requests refused because the upstream was down (connection refused). */
  upstreamDown: number;
}

/**
 * A TCP proxy on 127.0.0.1 that injects the faults a real network produces.
 *
 * It does not parse HTTP. It relies on HTTP/1.1 clients (undici, Node's http) sending one request at a time
 * per connection: bytes from the client while no request is outstanding start a new request, and the first
 * bytes from the server end it (the rest of the answer streams through). Each request gets its own upstream
 * connection, so round-robin happens per request even over a keep-alive client connection, and a fault
 * decided for one request never leaks into the next.
 */
export class FaultProxy {
  readonly stats: FaultProxyStats;
  private readonly server: Server;
  private readonly random: () => number;
  private readonly sockets = new Set<Socket>();
  private rates: Required<FaultRates>;
  private upstreams: number[];
  private nextUpstream = 0;
  private portNumber = 0;

  constructor(opts: FaultProxyOptions) {
    this.upstreams = [...opts.upstreams];
    this.random = seededRandom(opts.seed ?? 1);
    this.rates = normalizeRates(opts.faults);
    this.stats = {
      connections: 0,
      requests: 0,
      passed: 0,
      resets: 0,
      drops: 0,
      delays: 0,
      perUpstream: this.upstreams.map(() => 0),
      upstreamDown: 0,
    };
    this.server = createServer((client) => this.handle(client));
  }

  /** Starts listening on an ephemeral port of 127.0.0.1 (or `port`). */
  async listen(port = 0): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => resolve());
    });
    const address = this.server.address();
    this.portNumber = typeof address === 'object' && address ? address.port : 0;
    return this;
  }

  get port(): number {
    return this.portNumber;
  }

  get url(): string {
    return `http://127.0.0.1:${this.portNumber}`;
  }

  /** Changes the fault rates for requests that start from now on. */
  setFaults(faults: FaultRates | undefined): void {
    this.rates = normalizeRates(faults);
  }

  /** Replaces the upstream list (e.g. after an instance restarted on another port). */
  setUpstreams(upstreams: number[]): void {
    this.upstreams = [...upstreams];
    while (this.stats.perUpstream.length < upstreams.length) this.stats.perUpstream.push(0);
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private pickFault(): Fault {
    const r = this.random();
    const { reset, drop, delay } = this.rates;
    if (r < reset) return 'reset';
    if (r < reset + drop) return 'drop';
    if (r < reset + drop + delay) return 'delay';
    return 'none';
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    // Faults produce EPIPE/ECONNRESET on purpose; they must not crash the test process.
    socket.on('error', () => {});
  }

  private handle(client: Socket): void {
    this.stats.connections++;
    this.track(client);
    client.setNoDelay(true);
    let upstream: Socket | undefined;
    let awaitingAnswer = false;
    let fault: Fault = 'none';

    const endUpstream = () => {
      upstream?.destroy();
      upstream = undefined;
    };
    client.on('close', endUpstream);

    client.on('data', (chunk) => {
      if (!awaitingAnswer) {
        // A new request: the previous answer (if any) was read completely, or the client would not send.
        endUpstream();
        this.stats.requests++;
        fault = this.pickFault();
        if (fault === 'reset') {
          this.stats.resets++;
          client.resetAndDestroy();
          return;
        }
        awaitingAnswer = true;
        const index = this.nextUpstream++ % this.upstreams.length;
        const port = this.upstreams[index] ?? 0;
        this.stats.perUpstream[index] = (this.stats.perUpstream[index] ?? 0) + 1;
        const up = connect({ port, host: '127.0.0.1' });
        this.track(up);
        up.setNoDelay(true);
        upstream = up;
        const requestFault = fault;
        let answered = false;
        up.on('error', (err: NodeJS.ErrnoException) => {
          if (!answered && err.code === 'ECONNREFUSED') this.stats.upstreamDown++;
        });
        up.on('close', () => {
          if (upstream !== up) return;
          upstream = undefined;
          // The server went away before answering (crash, restart): the client sees its connection reset,
          // as it would through a real load balancer. After an answer, a closed upstream is just idle.
          if (!answered) {
            awaitingAnswer = false;
            client.resetAndDestroy();
          }
        });
        up.on('data', (answer) => {
          if (upstream !== up) return;
          if (answered) {
            client.write(answer);
            return;
          }
          answered = true;
          awaitingAnswer = false;
          if (requestFault === 'drop') {
            // The server has answered, so it has committed: only the client never learns the result.
            this.stats.drops++;
            client.resetAndDestroy();
            up.destroy();
            return;
          }
          if (requestFault === 'none') {
            this.stats.passed++;
            client.write(answer);
            return;
          }
          this.stats.delays++;
          up.pause();
          setTimeout(() => {
            if (!client.destroyed) client.write(answer);
            up.resume();
          }, this.rates.delayMs).unref();
        });
      }
      upstream?.write(chunk);
    });
  }
}

function normalizeRates(f: FaultRates | undefined): Required<FaultRates> {
  return { reset: f?.reset ?? 0, drop: f?.drop ?? 0, delay: f?.delay ?? 0, delayMs: f?.delayMs ?? 2_000 };
}
