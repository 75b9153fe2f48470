// A running generation: an async iterable of text chunks that also gives the whole answer.
//
// The generation starts at once (like `fetch`), whether or not anyone iterates: chunks queue up
// until read. Tokens reach the host at the strategy's boundaries (fused: every 4 to `chunkTokens`
// decode steps; megakernel: every `chunkTokens`; unfused: every token), so an iterator waiting for
// text receives everything that arrived together as one chunk.
import type { GenerateResult } from "./wasm/fuselm.js";
import { FuselmError, toFuselmError } from "./errors.js";

/** A piece of the generated text with the ids that produced it. `text` can be "" (an incomplete
 * character or a possible stop-sequence start is held back until it is decided). */
export interface GenerationChunk {
  text: string;
  tokenIds: number[];
}

/** Called by the wasm side per token (see `OnToken` in the wasm declarations). */
export type TokenSink = (text: string, tokenId: number | undefined) => boolean;

/** A generation in progress. Iterate it for streamed chunks, or await `text()` / `result()`.
 * Aborting (its `signal` or `abort()`) makes the iteration, `text()` and `result()` reject with
 * a `FuselmError` of kind "aborted"; the model is usable again as soon as they have settled. */
export class Generation implements AsyncIterable<GenerationChunk, void, undefined> {
  #queue: GenerationChunk[] = [];
  #wake: (() => void) | undefined;
  #settled = false;
  #aborted = false;
  #abortReason: unknown;
  readonly #stop = new AbortController();
  readonly #result: Promise<GenerateResult>;

  /** @internal Use `model.generate()`. `start` runs the generation with a token sink; `stop`
   * fires when the generation is aborted (the sink also refuses tokens from then on). */
  constructor(start: (sink: TokenSink, stop: AbortSignal) => Promise<GenerateResult>, signal?: AbortSignal) {
    const sink: TokenSink = (text, tokenId) => {
      if (this.#aborted) return false;
      const last = this.#queue.at(-1);
      if (last !== undefined) {
        // Not read yet: merge into it, so a reader gets one chunk per arrival.
        last.text += text;
        if (tokenId !== undefined) last.tokenIds.push(tokenId);
      } else {
        this.#queue.push({ text, tokenIds: tokenId === undefined ? [] : [tokenId] });
      }
      this.#notify();
      return true;
    };
    const onAbort = () => this.abort(signal?.reason);
    if (signal?.aborted) this.abort(signal.reason);
    else signal?.addEventListener("abort", onAbort, { once: true });
    const run = this.#aborted
      ? Promise.reject(this.#abortedError())
      : start(sink, this.#stop.signal).then(
          (r) => {
            if (this.#aborted || r.stopReason === "aborted") throw this.#abortedError();
            return r;
          },
          (e: unknown) => {
            throw this.#aborted ? this.#abortedError() : toFuselmError(e);
          },
        );
    this.#result = run.finally(() => {
      signal?.removeEventListener("abort", onAbort);
      this.#settled = true;
      this.#notify();
    });
    // The rejection is delivered through text()/result()/iteration; never unhandled.
    this.#result.catch(() => {});
  }

  /** Stops the generation (at the next chunk boundary on the GPU). */
  abort(reason?: unknown): void {
    if (this.#settled || this.#aborted) return;
    this.#aborted = true;
    this.#abortReason = reason;
    this.#stop.abort(reason);
    this.#notify();
  }

  /** The whole generated text. */
  async text(): Promise<string> {
    return (await this.#result).text;
  }

  /** The generated text and ids, why it stopped, and its timings. */
  result(): Promise<GenerateResult> {
    return this.#result;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<GenerationChunk, void, undefined> {
    for (;;) {
      const chunk = this.#queue.shift();
      if (chunk !== undefined) {
        yield chunk;
        continue;
      }
      if (this.#settled) {
        await this.#result; // throws on abort or error
        return;
      }
      await new Promise<void>((wake) => (this.#wake = wake));
    }
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  #abortedError(): FuselmError {
    const reason = this.#abortReason;
    const why = reason instanceof Error ? reason.message : reason === undefined ? "" : String(reason);
    return new FuselmError("aborted", `the generation was aborted${why ? `: ${why}` : ""}`, { cause: reason });
  }
}
