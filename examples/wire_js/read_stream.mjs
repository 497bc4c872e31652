// Reads a tracebus result stream in the binary format, in a browser or in Node >= 18.
//
//   GET /api/trace/job/{id}/stream[?follow=1]   Accept: application/vnd.msgpack
//
// The body is msgpack maps one after another (README, "The result on the wire"). Maps carry
// "type" as the NDJSON lines do; a "records" map carries "chunk" (bytes) instead of "data":
// byte 0 is 0 (the rest is msgpack) or 1 (the rest is zlib-compressed msgpack), and the
// msgpack is {columns: [...], rows: [[...], ...]}. decodeMultiStream splits the body as it
// arrives; DecompressionStream("deflate") is the zlib format, built into browsers and Node.
//
// Node:  npm install && node read_stream.mjs http://127.0.0.1:8000 JOB_ID [--follow]
//        node read_stream.mjs --file body.msgpack    (a saved body: tracebus fetch --format msgpack)

import { decode, decodeMultiStream } from "@msgpack/msgpack";

async function inflate(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** The rows of one "records" map, as objects keyed by column name. */
export async function rowsOf(message) {
  const chunk = message.chunk;
  const body = chunk.subarray(1);
  const { columns, rows } = decode(chunk[0] === 1 ? await inflate(body) : body);
  return rows.map((row) => Object.fromEntries(columns.map((c, i) => [c, row[i]])));
}

/** Every line of a result stream (a ReadableStream of bytes) as the NDJSON stream shows it. */
export async function* readResult(body) {
  for await (const message of decodeMultiStream(body)) {
    if (message.type === "records") {
      const { chunk, ...rest } = message;
      yield { ...rest, data: await rowsOf(message) };
    } else {
      yield message;
    }
  }
}

async function main(argv) {
  let body;
  if (argv[0] === "--file") {
    const { readFile } = await import("node:fs/promises");
    body = new Blob([await readFile(argv[1])]).stream();
  } else {
    const [base, jobId, follow] = argv;
    const resp = await fetch(`${base}/api/trace/job/${jobId}/stream${follow === "--follow" ? "?follow=1" : ""}`,
                             { headers: { Accept: "application/vnd.msgpack" } });
    if (!resp.ok) throw new Error(`HTTP ${resp.status}: ${await resp.text()}`);
    body = resp.body;
  }
  for await (const line of readResult(body)) {
    process.stdout.write(JSON.stringify(line) + "\n");  // the NDJSON lines, one per map
  }
}

if (typeof process !== "undefined" && process.argv[1] && import.meta.url.endsWith(process.argv[1].split("/").pop())) {
  main(process.argv.slice(2)).catch((e) => { console.error(`read_stream: ${e.message}`); process.exit(1); });
}
