import { connect, type Socket } from 'node:net';
import { type ParsedResponse, ResponseParser } from './response-parser.ts';

/**
 * One keep-alive `node:net` connection with one request in flight: the raw load generator's lane. A request
 * is one string written in one call; the response is parsed only for its status and the end of its body
 * (src/load/response-parser.ts). Costs the load generator a fraction of undici's CPU per request, so on 2
 * shared cores the server and the database get the CPU the ratios are about.
 */
export class RawConnection {
  private socket: Socket | undefined;
  private readonly parser = new ResponseParser();
  /** The request in flight and the socket it was written on (a late event of an older socket must not touch it). */
  private pending: { socket: Socket; resolve: (status: number) => void; reject: (error: Error) => void } | undefined;
  private readonly host: string;
  private readonly port: number;

  constructor(url: string) {
    const { hostname, port } = new URL(url);
    this.host = hostname;
    this.port = Number(port);
  }

  /** POSTs `body` to `path`; resolves with the status once the whole response has arrived. */
  post(path: string, key: string | undefined, body: string): Promise<number> {
    if (this.pending) return Promise.reject(new Error('RawConnection: one request at a time'));
    const request =
      `POST ${path} HTTP/1.1\r\nHost: ${this.host}:${this.port}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n${key === undefined ? '' : `Idempotency-Key: ${key}\r\n`}\r\n${body}`;
    return new Promise((resolve, reject) => {
      const socket = this.socket ?? this.open();
      this.pending = { socket, resolve, reject };
      socket.write(request);
    });
  }

  close(): void {
    this.socket?.destroy();
    this.socket = undefined;
  }

  /** A new socket (the first request, or the next one after a close or an error); writes queue until it connects. */
  private open(): Socket {
    const socket = connect({ host: this.host, port: this.port, noDelay: true, keepAlive: true });
    this.parser.reset();
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => {
      let responses: ParsedResponse[];
      try {
        responses = this.parser.push(chunk);
      } catch (error) {
        this.fail(socket, error as Error);
        return;
      }
      for (const response of responses) this.answer(socket, response);
    });
    socket.on('end', () => {
      try {
        const last = this.parser.end();
        if (last) this.answer(socket, last);
      } catch (error) {
        this.fail(socket, error as Error);
      }
      this.fail(socket, new Error('connection closed by the server'));
    });
    socket.on('error', (error) => this.fail(socket, error));
    socket.on('close', () => this.fail(socket, new Error('connection closed')));
    return socket;
  }

  private answer(socket: Socket, response: ParsedResponse): void {
    const pending = this.pending;
    if (pending?.socket !== socket) {
      this.fail(socket, new Error(`response ${response.status} with no request in flight`));
      return;
    }
    this.pending = undefined;
    // The server said it closes: the next request opens a new connection rather than racing the close.
    if (response.close) this.drop(socket);
    pending.resolve(response.status);
  }

  /** The socket is done (error, close, protocol error): the request in flight, if any, fails. */
  private fail(socket: Socket, error: Error): void {
    this.drop(socket);
    const pending = this.pending;
    if (pending?.socket !== socket) return;
    this.pending = undefined;
    pending.reject(error);
  }

  private drop(socket: Socket): void {
    socket.destroy();
    if (this.socket === socket) this.socket = undefined;
  }
}
